package username_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/costgate/costgate/internal/username"
	"golang.org/x/text/unicode/norm"
)

func TestNormalizeUsername(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		ok      bool
		tooLong bool
	}{
		{"alice", "alice", true, false},
		{"  Alice\t", "alice", true, false},
		{"ＡＬＩＣＥ", "alice", true, false}, // fullwidth: NFKC folds it
		{"ﬁnn", "finn", true, false},    // ligature
		{"ﬀ", "ff", true, false},
		{"ＳＴＲＡＳＳＥ", "strasse", true, false},
		// Full case folding: one user however a name is cased.
		{"Straße", "strasse", true, false},
		{"strasse", "strasse", true, false},
		{"STRASSE", "strasse", true, false},
		{"STRAẞE", "strasse", true, false}, // capital sharp s
		{"ΣΑΣ", "σασ", true, false},
		{"σας", "σασ", true, false}, // final sigma
		{"σασ", "σασ", true, false},
		// Unicode's default folding, not Turkish: I is i, dotless ı stays
		// itself, dotted İ is i with a combining dot above.
		{"DIYAR", "diyar", true, false},
		{"dıyar", "dıyar", true, false},
		{"DİYAR", "di\u0307yar", true, false},
		// Default-ignorable code points are removed wherever they are.
		{"ab\u200bc", "abc", true, false},     // zero-width space
		{"al\u00adice", "alice", true, false}, // soft hyphen
		{"\ufeffalice", "alice", true, false}, // BOM
		{"a\u200c\u200dl\u2060ice\ufe0f", "alice", true, false},
		{"\u200b", "", false, false},
		{"alice \u00a0\u3000", "alice", true, false}, // NBSP and ideographic space trim
		{"alice\u200b ", "alice", true, false},
		// The derived property, not only its Other_ part: tag characters,
		// the Mongolian vowel separator and Hangul fillers are ignorable;
		// prepended concatenation marks and interlinear annotation
		// characters are format characters that stay.
		{"a\U000e0041b\u180ec\u115f", "abc", true, false},
		{"a\u0600b\ufff9c", "a\u0600b\ufff9c", true, false},
		// Cherokee folds to its capitals (x/text's Fold alone swaps cases).
		{"\u13a0\u13f5", "\u13a0\u13f5", true, false},
		{"\uab70\u13fd", "\u13a0\u13f5", true, false},
		// Removing an ignorable can join what NFKC then composes.
		{"e\u200b\u0301", "\u00e9", true, false},
		{"", "", false, false},
		{"   ", "", false, false},
		{"\xff\xfe", "", false, false},
		{strings.Repeat("a", 256), strings.Repeat("a", 256), true, false},
		{strings.Repeat("a", 257), "", false, true},
		// 60 KB of U+FDFA: refused by its length before NFKC would expand it 18×.
		{strings.Repeat("\ufdfa", 20_000), "", false, true},
	}
	for _, tc := range tests {
		got, err := username.Normalize(tc.in)
		var ue *username.Error
		if tooLong := errors.As(err, &ue) && ue.TooLong; got != tc.want || (err == nil) != tc.ok || tooLong != tc.tooLong {
			t.Errorf("NormalizeUsername(%.20q) = %q, %v; want %q, ok %v, too long %v", tc.in, got, err, tc.want, tc.ok, tc.tooLong)
		}
	}
}

// ReadUsername reads the login body's one "username"; a body naming it
// twice or in another letter case is refused as Ambiguous, whichever member
// comes first and however its key is escaped.
func TestReadUsername(t *testing.T) {
	tests := []struct {
		body      string
		want      string
		ambiguous bool
	}{
		{`{"username":"Straße","password":"x"}`, "strasse", false},
		{`{"\u0075sername":"Bob"}`, "bob", false},
		{`{"profile":{"username":"eve"},"username":"bob"}`, "bob", false},
		{`{"username":"victim","username":"x"}`, "", true},
		{`{"username":"victim","USERNAME":"x"}`, "", true},
		{`{"Username":"victim"}`, "", true},
		{`{"username":"victim","\u0055SERNAME":"x"}`, "", true},
		{`{"username":"a"}{"username":"b"}`, "", false},
		{`{"username":"\u0041l\u00ADice\n"}`, "alice", false},
		{`{"username":null}`, "", false},
		{`{"username":7}`, "", false},
		{`{"username":["bob"]}`, "", false},
		{`{"password":"x"}`, "", false},
		{`["username","bob"]`, "", false},
		{`"bob"`, "", false},
		{`null`, "", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", "/login", strings.NewReader(tc.body))
		got, err := username.Read(r, 0)
		var ue *username.Error
		ambiguous := errors.As(err, &ue) && ue.Ambiguous
		if got != tc.want || ambiguous != tc.ambiguous || (err == nil) != (tc.want != "") {
			t.Errorf("ReadUsername(%s) = %q, %v; want %q, ambiguous %v", tc.body, got, err, tc.want, tc.ambiguous)
		}
		if rest, _ := io.ReadAll(r.Body); string(rest) != tc.body {
			t.Errorf("after ReadUsername(%s) the handler reads %q", tc.body, rest)
		}
	}
}

// A normalised name normalises to itself (a name stored once normalised is
// limited as the same user when it comes back), and canonically equivalent
// spellings (composed or not) are one user.
func FuzzNormalizeUsername(f *testing.F) {
	for _, s := range []string{"alice", "Straße", "ΣΑΣ", "σας", "ﬀ", "ＡＬＩＣＥ", "ab\u200bc", "al\u00adice", "\ufeffx", "DİYAR", "dıyar",
		"e\u200b\u0301", "\u1fb3", "\u0390", "ǅ", "\u0345", "ß\u0301", "\ufdfa", "Å", "ﬃ", "㍱", "\u1e9e", "ᾼ", "x\u034f\u0301", "  Bob\t", "\u13a0", "\uab70"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once, err := username.Normalize(s)
		if err != nil {
			return
		}
		if !utf8.ValidString(once) {
			t.Fatalf("NormalizeUsername(%+q) = %+q, not UTF-8", s, once)
		}
		twice, err := username.Normalize(once)
		if twice != once || err != nil {
			t.Errorf("NormalizeUsername(%+q) = %+q, but that normalises to %+q, %v", s, once, twice, err)
		}
		for name, form := range map[string]norm.Form{"NFD": norm.NFD, "NFC": norm.NFC} {
			if v := form.String(s); len(v) <= username.MaxBytes {
				if got, _ := username.Normalize(v); got != once {
					t.Errorf("NormalizeUsername(%+q) = %+q, but of its %s form %+q", s, once, name, got)
				}
			}
		}
	})
}
