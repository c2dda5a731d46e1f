// Package username reads and normalises the username a login is limited by.
package username

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/costgate/costgate/internal/jsonkeys"
)

// MaxBytes bounds a username before it is normalised: NFKC can
// expand a string eighteen-fold, and a 60 KB name of U+FDFA costs 21 ms of
// CPU to normalise.
const MaxBytes = 256

// DefaultMaxBodyBytes bounds a login body read for its username.
const DefaultMaxBodyBytes = 64 << 10

// Error says why a login body gives no username to limit by.
// Status is the HTTP status the doors answer with (400 or 413).
type Error struct {
	Status int
	Reason string
	// TooLong reports a username over MaxBytes: the request is
	// still charged to the policies that do not key by username.
	TooLong bool
	// Ambiguous reports a login body naming "username" more than once or
	// in another letter case, which the application could read as another
	// user: charged as TooLong is.
	Ambiguous bool
}

func (e *Error) Error() string { return "username: " + e.Reason }

// Normalize returns the form a username is limited by, so that
// "Alice", " alice" and "ＡＬＩＣＥ" share one limit, as do "Straße" and
// "STRASSE", "ΣΑΣ" and "σας", "al\u00adice" and "alice": NFKC, full case folding
// (Unicode's default, not Turkish: "I" is "i", "ı" stays itself), the
// default-ignorable code points (zero-width space, soft hyphen, BOM,
// variation selectors, ...) removed and white space trimmed, repeated until
// nothing changes, so that a normalised name normalises to itself. A name
// that is empty once normalised, not UTF-8, or longer than MaxBytes
// (checked before any normalisation) is refused.
func Normalize(s string) (string, error) {
	if len(s) > MaxBytes {
		return "", &Error{Status: http.StatusBadRequest, TooLong: true,
			Reason: fmt.Sprintf("longer than %d bytes", MaxBytes)}
	}
	if !utf8.ValidString(s) {
		return "", &Error{Status: http.StatusBadRequest, Reason: "not UTF-8"}
	}
	s, stable := normalizeRounds(s)
	if !stable {
		return "", &Error{Status: http.StatusBadRequest, Reason: "not stable under normalisation"}
	}
	if s == "" {
		return "", &Error{Status: http.StatusBadRequest, Reason: "empty"}
	}
	return s, nil
}

// maxNormalizeRounds bounds the rounds of normalizeRounds. Folding can undo
// NFKC and dropping an ignorable can join what it separated: every code
// point alone settles after one changing round, a letter followed by two
// marks or ignorables after two; the rest is a margin.
const maxNormalizeRounds = 4

// foldCase is Unicode full case folding; a fold Caser is stateless, so one
// serves every goroutine.
var foldCase = cases.Fold()

// normalizeRounds applies NFKC, case folding, NFKC, removal of ignorables
// and trimming until a round changes nothing, and reports whether one did
// within maxNormalizeRounds.
func normalizeRounds(s string) (string, bool) {
	for range maxNormalizeRounds {
		folded := strings.Map(cherokeeCapital, foldCase.String(norm.NFKC.String(s)))
		next := strings.TrimSpace(strings.Map(dropIgnorable, norm.NFKC.String(folded)))
		if next == s {
			return s, true
		}
		s = next
	}
	return s, false
}

// cherokeeCapital maps Cherokee small letters to their capitals, as
// Unicode case folding does (CaseFolding.txt); x/text's Fold maps capitals
// to small letters and small letters to capitals instead, which no number
// of rounds would settle.
func cherokeeCapital(r rune) rune {
	switch {
	case 0xAB70 <= r && r <= 0xABBF: // small a .. small mv
		return r - 0xAB70 + 0x13A0
	case 0x13F8 <= r && r <= 0x13FD: // small ye .. small mv
		return r - 8
	}
	return r
}

// dropIgnorable is a strings.Map function removing default-ignorable code points.
func dropIgnorable(r rune) rune {
	if isDefaultIgnorable(r) {
		return -1
	}
	return r
}

// Read reads a JSON login body ({"username": "..."}) for its
// username and puts the body back for the handler. At most maxBody bytes
// are read (0 means DefaultMaxBodyBytes). A body naming "username" more
// than once, or in another letter case ("USERNAME", "\u0055sername"), is
// refused as Ambiguous: the handler could read another member than this.
func Read(r *http.Request, maxBody int64) (string, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if r.Body == nil || r.Body == http.NoBody {
		return "", &Error{Status: http.StatusBadRequest, Reason: `the body must be a JSON object with a "username"`}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", &Error{Status: http.StatusBadRequest, Reason: "could not read the body"}
	}
	if int64(len(body)) > maxBody {
		return "", &Error{Status: http.StatusRequestEntityTooLarge, Reason: fmt.Sprintf("the body is larger than %d bytes", maxBody)}
	}
	// Read strictly, in one pass: encoding/json would take "USERNAME" for
	// "username" and the last of two, the application's handler may take another.
	var username []byte
	var ambiguous *jsonkeys.Error
	switch err := jsonkeys.Read(body, jsonkeys.Names{"username": nil}, func(_ string, value []byte) { username = value }); {
	case errors.As(err, &ambiguous):
		return "", ambiguousUsername(ambiguous)
	case err != nil: // not JSON, or not UTF-8, which encoding/json would quietly turn into U+FFFD
		return "", noUsername()
	}
	name, ok := jsonkeys.String(username) // absent, null or not a string: no username
	if !ok {
		return "", noUsername()
	}
	return Normalize(name)
}

func noUsername() *Error {
	return &Error{Status: http.StatusBadRequest, Reason: `the body must be a JSON object with a "username" string`}
}

func ambiguousUsername(e *jsonkeys.Error) *Error {
	reason := `the body has "username" more than once`
	if !e.Duplicate {
		reason = fmt.Sprintf(`the body has %q, "username" in another letter case`, e.Key)
	}
	return &Error{Status: http.StatusBadRequest, Ambiguous: true, Reason: reason}
}
