package username_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/username"
)

// What a login body costs to read for its username: an ordinary one, and a
// hostile 60 KB username of U+FDFA (NFKC expands each 18×), refused by its
// length before any normalisation.
func BenchmarkReadUsername(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"alice", `{"username":"Alice","password":"wonderland"}`},
		{"60KB-U+FDFA", `{"username":"` + strings.Repeat("\ufdfa", 20_000) + `","password":"x"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			r := httptest.NewRequest("POST", "/login", nil)
			b.ReportAllocs()
			for b.Loop() {
				r.Body = io.NopCloser(bytes.NewReader(body))
				username.Read(r, 0)
			}
		})
	}
}
