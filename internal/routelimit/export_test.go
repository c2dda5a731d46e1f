package routelimit

// FoldRune is foldRune, for the exhaustive test of every rune.
var FoldRune = foldRune
