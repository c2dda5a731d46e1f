package routelimit

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDecodes bounds how many times NormalizePath decodes a path: no client
// needs more, and each round costs a pass over up to 8 KiB.
const maxDecodes = 3

// NormalizePath is the path routes are matched against: p, a request's path
// as it was sent (%-escaped, without the query), spelt as the most
// forgiving common backend routes it, so that every spelling of a limited
// route's path is charged as that route:
//
//   - %-escapes are decoded, %2F as "/", and the result decoded again while
//     it still holds escapes, at most three times in all (%252F is "/" too:
//     a backend behind a proxy that decodes may decode a second time); IIS's
//     %uXXXX counts as an escape. In p every "%" must start an escape; a
//     "%" that decoding produced and that starts none is kept, as "%25".
//   - once decoded the path must be UTF-8 without control characters: %00,
//     overlong forms (%C0%AF), a bad escape (%zz) and a path still escaped
//     after three decodings are errors, never guessed at.
//   - "\" is "/" (IIS).
//   - every segment loses its ";parameters" (servlet containers: /login;x=1).
//   - empty segments and "." are removed and ".." removes the segment before
//     it, never climbing above the root: repeated and trailing slashes go.
//   - then a "?" or "#" ends the path (a proxy that decodes %3F and passes
//     the path on makes the rest a query).
//   - letters are folded to lower case, with the non-ASCII letters some
//     backends fold to ASCII (KELVIN SIGN to k, ſ to s, ı and İ to i).
//
// The result starts with "/", and normalising it again changes nothing.
// Route patterns are normalised the same way, and an exact pattern also
// matches its path with a format suffix (/login.json is /login, as Rails
// routes it); the method is compared in upper case, HEAD as GET.
func NormalizePath(p string) (string, error) {
	if isNormal(p) {
		return p, nil // the common case: no allocation
	}
	s, err := decode(p)
	if err != nil {
		return "", err
	}
	var segments []string
	for seg := range strings.FieldsFuncSeq(s, func(c rune) bool { return c == '/' || c == '\\' }) {
		seg, _, _ = strings.Cut(seg, ";")
		segments = appendSegment(segments, seg)
	}
	return joinSegments(cutQuery(segments)), nil
}

// decode is p %-decoded until no escape is left (see NormalizePath).
func decode(p string) (string, error) {
	if i := badEscape(p); i >= 0 {
		return "", fmt.Errorf("path %q has a bad %%-escape at byte %d", truncate(p), i)
	}
	s := p
	for n := 0; hasEscape(s); n++ {
		if n == maxDecodes {
			return "", fmt.Errorf("path %q is still %%-escaped after %d decodings", truncate(p), maxDecodes)
		}
		s = unescape(s)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("path %q is not UTF-8 once decoded", truncate(p))
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return "", fmt.Errorf("path %q has a control character once decoded", truncate(p))
	}
	return s, nil
}

// appendSegment resolves seg onto segments: "" and "." stay, ".." climbs.
func appendSegment(segments []string, seg string) []string {
	switch seg {
	case "", ".":
		return segments
	case "..":
		return segments[:max(len(segments)-1, 0)]
	}
	return append(segments, strings.Map(foldRune, seg))
}

// cutQuery ends the path at its first "?" or "#", after dot segments are
// resolved: Tomcat reads /x%3F/../login as /login, and so does this.
func cutQuery(segments []string) []string {
	for i, seg := range segments {
		if j := strings.IndexAny(seg, "?#"); j >= 0 {
			return appendSegment(segments[:i], seg[:j])
		}
	}
	return segments
}

// segmentEscaper keeps what a segment holds from reading as structure.
var segmentEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// joinSegments is the path of segments; a "%" or "/" they hold is escaped,
// so that the result reads as itself.
func joinSegments(segments []string) string {
	var b strings.Builder
	for _, seg := range segments {
		b.WriteByte('/')
		segmentEscaper.WriteString(&b, seg)
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// literalPath is p, which NormalizePath accepts, read as Express and chi
// read it: only a "/" sent as such separates segments, and ";", "\", an
// escaped "/" and dot segments are characters of their segment. Empty
// segments go and letters are folded, as NormalizePath does.
func literalPath(p string) string {
	var segments []string
	for seg := range strings.SplitSeq(p, "/") {
		for n := 0; n < maxDecodes && hasEscape(seg); n++ {
			seg = unescape(seg)
		}
		if seg != "" {
			segments = append(segments, strings.Map(foldRune, seg))
		}
	}
	return joinSegments(segments)
}

// isNormal reports whether NormalizePath would return p unchanged.
func isNormal(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 1 // of the current segment
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
			continue
		}
		switch c := p[i]; {
		case c < 0x20, c == 0x7f, c >= utf8.RuneSelf, 'A' <= c && c <= 'Z':
			return false
		case c == '%', c == '\\', c == ';', c == '?', c == '#':
			return false
		}
	}
	return true
}

// badEscape is the index of the first "%" of s that starts no escape, or -1.
func badEscape(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			n, _ := escapeAt(s[i:])
			if n == 0 {
				return i
			}
			i += n - 1
		}
	}
	return -1
}

// hasEscape reports whether s holds an escape unescape would decode.
func hasEscape(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if n, _ := escapeAt(s[i:]); n > 0 {
			return true
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// unescape decodes every escape of s once, leaving any other "%" alone.
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] == '%' {
			if n, decoded := escapeAt(s[i:]); n > 0 {
				b.WriteString(decoded)
				i += n
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// escapeAt decodes the escape s starts with: %XX (one byte) or %uXXXX (a
// code point, as IIS reads it). n is 0 when s starts with no escape.
func escapeAt(s string) (n int, decoded string) {
	if len(s) >= 3 && isHex(s[1]) && isHex(s[2]) {
		return 3, string([]byte{unhex(s[1])<<4 | unhex(s[2])})
	}
	if len(s) >= 6 && (s[1] == 'u' || s[1] == 'U') && isHex(s[2]) && isHex(s[3]) && isHex(s[4]) && isHex(s[5]) {
		r := rune(unhex(s[2]))<<12 | rune(unhex(s[3]))<<8 | rune(unhex(s[4]))<<4 | rune(unhex(s[5]))
		if utf8.ValidRune(r) { // a lone surrogate is no character: left as it is
			return 6, string(r)
		}
	}
	return 0, ""
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// foldRune is r without case. Upper then lower case folds what Go's
// EqualFold folds (K, k and KELVIN SIGN) and also what .NET's and Java's
// case-insensitive comparisons equate (ı and İ with i, ſ with s).
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

func truncate(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
