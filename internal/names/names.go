// Package names says what may name a policy or a key part.
package names

// Valid reports whether s can name a policy: letters, digits, '_', '-'
// and '.', since names go into store keys, headers and metric labels.
func Valid(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
