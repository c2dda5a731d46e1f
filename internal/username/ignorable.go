package username

import "unicode"

// isDefaultIgnorable reports the Unicode property Default_Ignorable_Code_Point
// (soft hyphen, zero-width space and joiners, word joiner, BOM, variation
// selectors, tag characters, Hangul fillers, ...). Go's unicode package has
// no table for it, so it is derived as DerivedCoreProperties.txt derives it:
//
//	Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
//	- White_Space - FFF9..FFFB (interlinear annotation)
//	- 13430..1343F (Egyptian hieroglyph format controls)
//	- Prepended_Concatenation_Mark
//
// in the Unicode version of Go's tables (unicode.Version).
func isDefaultIgnorable(r rune) bool {
	switch {
	case r < 0xAD: // ASCII and Latin-1 up to the soft hyphen have none
		return false
	case unicode.Is(unicode.White_Space, r),
		0xFFF9 <= r && r <= 0xFFFB,
		0x13430 <= r && r <= 0x1343F,
		unicode.Is(unicode.Prepended_Concatenation_Mark, r):
		return false
	}
	return unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}
