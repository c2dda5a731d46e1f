package jsonkeys_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

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

// Read hands back the top-level members it checked, raw and trimmed, under
// the name they matched (escapes in the key decoded).
func TestRead(t *testing.T) {
	names := jsonkeys.Names{"query": nil, "variables": nil, "extensions": {"persistedQuery": nil}}
	data := `{ "\u0071uery" : "{ a }" , "other":{"query":1}, "variables": {"n": [1, 2]},"extensions":null }`
	got := map[string]string{}
	err := jsonkeys.Read([]byte(data), names, func(name string, value []byte) { got[name] = string(value) })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"query": `"{ a }"`, "variables": `{"n": [1, 2]}`, "extensions": "null"}
	if len(got) != len(want) {
		t.Errorf("Read found %v, want %v", got, want)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("Read found %s = %s, want %s", name, got[name], v)
		}
	}
}

// String decodes as encoding/json does, broken surrogates included.
func TestString(t *testing.T) {
	for _, raw := range []string{
		`""`, `"plain"`, `"a\nb\t\"c\"\\\/"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`,
		`"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"é ſ"`, `"\u0000"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", raw, err)
		}
		if got, ok := jsonkeys.String([]byte(raw)); !ok || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{``, `"`, `1`, `null`, `{}`} {
		if _, ok := jsonkeys.String([]byte(raw)); ok {
			t.Errorf("String(%s) took it for a string", raw)
		}
	}
}

// Read accepts exactly the UTF-8 JSON encoding/json accepts (ambiguous
// objects aside), and the members it hands back are those an exact-key
// reader takes, their strings decoded alike.
func FuzzRead(f *testing.F) {
	for _, s := range []string{`{"query":"{ a }","variables":{"n":1}}`, `{"query":"\ud83d\u0041","\u0071uery":1}`,
		` {"query" : "x\n" } `, `[{"query":1}]`, `{"query":-0.5e+3}`, `"\u00e9"`, `{"a":[true,false,null,{}]}`} {
		f.Add([]byte(s))
	}
	names := jsonkeys.Names{"query": nil, "variables": nil}
	f.Fuzz(func(t *testing.T, data []byte) {
		found := map[string][]byte{}
		err := jsonkeys.Read(data, names, func(name string, value []byte) { found[name] = value })
		var ambiguous *jsonkeys.Error
		valid := json.Valid(data) && utf8.Valid(data)
		switch {
		case errors.As(err, &ambiguous):
			return // found while reading, as far as the data is read
		case err != nil && valid:
			t.Fatalf("Read(%q) = %v, but it is JSON", data, err)
		case err == nil && !valid:
			t.Fatalf("Read accepted %q, which is not JSON", data)
		case err != nil:
			return
		}
		var exact map[string]json.RawMessage
		if json.Unmarshal(data, &exact) != nil {
			if len(found) > 0 {
				t.Fatalf("Read(%q) found members of what is not an object", data)
			}
			return
		}
		for name := range names {
			if string(found[name]) != string(exact[name]) {
				t.Errorf("in %q Read found %s = %s, an exact-key reader %s", data, name, found[name], exact[name])
			}
			var want string
			if json.Unmarshal(exact[name], &want) == nil && exact[name] != nil && string(exact[name]) != "null" {
				if got, ok := jsonkeys.String(found[name]); !ok || got != want {
					t.Errorf("String(%s) = %q, want %q", found[name], got, want)
				}
			}
		}
	})
}
