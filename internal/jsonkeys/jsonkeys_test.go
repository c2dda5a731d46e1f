package jsonkeys_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/costgate/costgate/internal/jsonkeys"
)

func TestCheck(t *testing.T) {
	login := jsonkeys.Names{"username": nil}
	graphql := jsonkeys.Names{"query": nil, "extensions": {"persistedQuery": {"sha256Hash": nil}}}
	tests := []struct {
		name  string
		names jsonkeys.Names
		data  string
		want  *jsonkeys.Error // nil: no ambiguity
	}{
		{"plain", login, `{"username":"alice","password":"x"}`, nil},
		{"absent", login, `{"password":"x"}`, nil},
		{"other names may repeat", login, `{"username":"a","pad":1,"pad":2,"PAD":3}`, nil},
		{"duplicate", login, `{"username":"victim","username":"x"}`, &jsonkeys.Error{Name: "username", Key: "username", Duplicate: true}},
		{"duplicate of another type", login, `{"username":"victim","password":"x","username":null}`, &jsonkeys.Error{Name: "username", Key: "username", Duplicate: true}},
		{"upper case", login, `{"username":"victim","USERNAME":"x"}`, &jsonkeys.Error{Name: "username", Key: "USERNAME"}},
		{"variant alone", login, `{"UserName":"x"}`, &jsonkeys.Error{Name: "username", Key: "UserName"}},
		// encoding/json folds like bytes.EqualFold: U+017F long s is an s to it.
		{"long s", login, `{"username":"victim","uſername":"x"}`, &jsonkeys.Error{Name: "username", Key: "uſername"}},
		{"escaped duplicate", login, `{"username":"victim","\u0075sername":"x"}`, &jsonkeys.Error{Name: "username", Key: "username", Duplicate: true}},
		{"escaped variant", login, `{"\u0055SERNAME":"x"}`, &jsonkeys.Error{Name: "username", Key: "USERNAME"}},
		{"escaped alone is the name", login, `{"\u0075sername":"alice"}`, nil},
		{"nested object is not the top level", login, `{"profile":{"username":"x","USERNAME":"y"},"username":"alice"}`, nil},
		{"array elements are not the top level", login, `{"list":[{"username":"x"}],"username":"alice"}`, nil},
		{"string value is not a key", login, `{"note":"\"username\":","username":"alice"}`, nil},
		{"top level array", login, `[{"username":"a","username":"b"}]`, nil},
		{"top level scalar", login, `"username"`, nil},
		{"nested duplicate", graphql, `{"extensions":{"persistedQuery":{"sha256Hash":"a","sha256Hash":"b"}}}`,
			&jsonkeys.Error{Path: "extensions.persistedQuery", Name: "sha256Hash", Key: "sha256Hash", Duplicate: true}},
		{"nested variant", graphql, `{"extensions":{"persistedQuery":{"sha256Hash":"a","SHA256HASH":"b"}}}`,
			&jsonkeys.Error{Path: "extensions.persistedQuery", Name: "sha256Hash", Key: "SHA256HASH"}},
		{"variant one level up", graphql, `{"extensions":{"persistedQuery":{}},"Extensions":{}}`, &jsonkeys.Error{Name: "extensions", Key: "Extensions"}},
		{"nested object named twice", graphql, `{"extensions":{"persistedQuery":{}},"extensions":{}}`, &jsonkeys.Error{Name: "extensions", Key: "extensions", Duplicate: true}},
		{"nested names only under their parent", graphql, `{"query":"{a}","sha256Hash":1,"SHA256HASH":2,"other":{"persistedQuery":1,"persistedQuery":2}}`, nil},
		{"nested value not an object", graphql, `{"extensions":null,"query":"{a}"}`, nil},
		{"huge number", login, `{"n":1e999,"username":"a"}`, nil},
		{"checked name holding an array", graphql, `{"extensions":[{"persistedQuery":1,"persistedQuery":2}],"query":"{a}"}`, nil},
		{"checked name holding a scalar", graphql, `{"extensions":"x","query":"{a}"}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := jsonkeys.Check([]byte(tc.data), tc.names)
			var got *jsonkeys.Error
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("Check(%s) = %v, want no syntax error", tc.data, err)
			}
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("Check(%s) = %v, want nil", tc.data, err)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Errorf("Check(%s) = %#v, want %#v", tc.data, got, tc.want)
			}
		})
	}
}

// What encoding/json itself refuses, and what it would read past (bytes
// that are not UTF-8, a second value), is not one JSON value.
func TestCheckInvalidJSON(t *testing.T) {
	for _, data := range []string{
		``, ` `, `{`, `{"username"}`, `{"username":}`, `{"username":"a",}`, `{"username":"a" "x":1}`,
		`{username:"a"}`, `{"a":[1,}`, `{"a":{"b":1]}`, `{"username":"a"}{"username":"b"}`, `{"username":"a"} x`,
		`{"username":[1,]}`, `{"username":[1 2]}`, `{"username":[`, `{"username":[{"a":}]}`, `{"username":{"a":1,}}`,
		"\ufeff{\"username\":\"a\"}", "{\"username\":\"\xff\"}", "{\"\xffsername\":\"a\"}", `{"username":"a\q"}`,
	} {
		err := jsonkeys.Check([]byte(data), jsonkeys.Names{"username": nil})
		if !errors.Is(err, jsonkeys.ErrSyntax) {
			t.Errorf("Check(%q) = %v, want ErrSyntax", data, err)
		}
	}
}

// Whatever the input, Check answers and never panics; what it accepts is
// JSON encoding/json reads, and in an accepted object encoding/json and an
// exact-key reader take the same username.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"username":"a"}`, `{"username":"a","USERNAME":"b"}`, `{"a":{"username":[1,{"x":2}]}}`, `[1,"x",null]`, `{"\u0075sername":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if jsonkeys.Check(data, jsonkeys.Names{"username": nil}) != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Check accepted %q, which is not JSON", data)
		}
		var folded struct {
			Username json.RawMessage `json:"username"`
		}
		var exact map[string]json.RawMessage
		if json.Unmarshal(data, &exact) != nil {
			return // not an object
		}
		if err := json.Unmarshal(data, &folded); err != nil {
			t.Fatalf("Unmarshal(%q) into a struct: %v", data, err)
		}
		if string(folded.Username) != string(exact["username"]) {
			t.Errorf("in %q encoding/json reads username %s, an exact-key reader %s", data, folded.Username, exact["username"])
		}
	})
}
