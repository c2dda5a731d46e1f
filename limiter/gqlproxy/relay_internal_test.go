package gqlproxy

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
)

var shopSDL = `type Query { items(first: Int): [Item!]! name: String }
type Item { id: ID! tags: [String!]! }`

func relayOnce(t testing.TB, reply string) (string, error) {
	t.Helper()
	schema, err := complexity.LoadSDL("shop.graphqls", shopSDL)
	if err != nil {
		t.Fatal(err)
	}
	op := mustOperation(t, schema, `{ items(first: 5) { id tags } name }`)
	count, err := schema.NewActualCounter(op, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	out := &replyWriter{w: rec}
	ext := &replyWriter{max: maxExtensions}
	sc := newScanner(strings.NewReader(reply), 0)
	sc.buf = make([]byte, 16) // a small window: every token crosses its edge somewhere
	sc.watch = []*replyWriter{out, ext}
	if _, err := sc.envelope(out, count, ext); err != nil {
		return "", err
	}
	closeAnswer(out, ext, map[string]int{"n": 1})
	out.close()
	return rec.Body.String(), nil
}

// The scanner accepts exactly JSON (encoding/json's grammar), and what it
// writes is JSON that decodes to what the upstream sent.
func TestScannerIsJSON(t *testing.T) {
	for _, reply := range []string{
		`{"data":{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00 é😀"}}`,
		`{"data":{"items":[{"id":"1","tags":[]},{"id":"2","tags":["x","y"]}],"name":null}}`,
		`{"data":{"name":-0.5e+10,"n2":0,"n3":1E-2,"n4":true,"n5":false,"n6":[[[]]],"n7":{}}}`,
		" \t\r\n{ \"errors\" : [ { \"message\" : \"m\" } ] , \"data\" : null } \n",
		`{"data":{"name":"lone \ud83d surrogate"}}`,
		`{"data":{"名前":"x","a\u0000b":1}}`,
	} {
		got, err := relayOnce(t, reply)
		if err != nil {
			t.Errorf("%s: %v", reply, err)
			continue
		}
		var in, out map[string]any
		json.Unmarshal([]byte(reply), &in)
		if err := json.Unmarshal([]byte(got), &out); err != nil {
			t.Errorf("%s → %s: not JSON: %v", reply, got, err)
			continue
		}
		delete(out, "extensions")
		if in["data"] == nil {
			in["data"] = nil
		}
		if a, b := mustJSON(in), mustJSON(out); a != b {
			t.Errorf("%s → %s", a, b)
		}
	}
	for _, reply := range []string{
		`{"data":{"name":01}}`, `{"data":{"name":1.}}`, `{"data":{"name":-}}`, `{"data":{"name":1e}}`,
		`{"data":{"name":tru}}`, `{"data":{"name":"\x"}}`, `{"data":{"name":"\u12"}}`, "{\"data\":{\"name\":\"a\nb\"}}",
		`{"data":{"name":1,}}`, `{"data":{"items":[1,]}}`, `{"data":{,}}`, `{"data":{"name" 1}}`, `{"data":{"name":1}`,
		`{"data":{}}x`, `{"data":{}}{}`, `{"data":{}} ,`, `{"data":{}, "data":{}}`, `{"data":[]}`, `{"data":"x"}`,
		`{"errors":[1]}`, `{"errors":{}}`, `{"errors":[{},]}`, `{"extensions":[]}`, `{}`, `[]`, ``, `{"data":null}`,
		`{"data":{"name":` + strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1) + `}}`,
	} {
		if got, err := relayOnce(t, reply); err == nil {
			t.Errorf("%q accepted: %s", reply, got)
		}
	}
}

// FuzzScanner: whatever the upstream sends, the proxy either refuses it or
// writes JSON, and it only accepts JSON.
//
//	go test -run='^$' -fuzz=FuzzScanner -fuzztime=1m ./limiter/gqlproxy/
func FuzzScanner(f *testing.F) {
	f.Add(`{"data":{"items":[{"id":"1","tags":["a"]}],"name":"n"},"errors":[{"message":"m"}],"extensions":{"x":1,"cost":2}}`)
	f.Add(`{"data":{"name":"\ud83d\ude00\u00e9"}}`)
	f.Fuzz(func(t *testing.T, reply string) {
		got, err := relayOnce(t, reply)
		if err != nil {
			return
		}
		if !json.Valid([]byte(reply)) {
			t.Fatalf("accepted %q, which is not JSON", reply)
		}
		if !json.Valid([]byte(got)) {
			t.Fatalf("%q → %q, not JSON", reply, got)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func mustOperation(t testing.TB, schema *complexity.Schema, query string) *ast.OperationDefinition {
	t.Helper()
	doc, errs := gqlparser.LoadQuery(schema.AST(), query)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return doc.Operations[0]
}
