package manifest_test

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/manifest"
)

const (
	shop  = "query Shop { products { nodes { id } } }"
	other = "query Other { __typename }"
)

func sum256(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }
func sum1(s string) string   { b := sha1.Sum([]byte(s)); return hex.EncodeToString(b[:]) }
func sumMD5(s string) string { b := md5.Sum([]byte(s)); return hex.EncodeToString(b[:]) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func apolloManifest(ops ...string) string {
	return `{"format":"apollo-persisted-query-manifest","version":1,"operations":[` + strings.Join(ops, ",") + `]}`
}

func apolloOp(id, name, body string) string {
	return `{"id":` + quote(id) + `,"name":` + quote(name) + `,"type":"query","body":` + quote(body) + `}`
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []manifest.Document
	}{
		{"Apollo", apolloManifest(apolloOp(sum256(shop), "Shop", shop), apolloOp(sum256(other), "Other", other)),
			[]manifest.Document{{ID: sum256(shop), Name: "Shop", Type: "query", Body: shop}, {ID: sum256(other), Name: "Other", Type: "query", Body: other}}},
		{"Apollo, an id twice with the same body", apolloManifest(apolloOp(sum256(shop), "Shop", shop), apolloOp(sum256(shop), "Shop", shop)),
			[]manifest.Document{{ID: sum256(shop), Name: "Shop", Type: "query", Body: shop}}},
		{"GraphQL Codegen, SHA-256", `{` + quote(sum256(shop)) + `:` + quote(shop) + `}`,
			[]manifest.Document{{ID: sum256(shop), Body: shop}}},
		{"GraphQL Codegen, SHA-1", `{` + quote(sum1(shop)) + `:` + quote(shop) + `}`,
			[]manifest.Document{{ID: sum1(shop), Body: shop}}},
		{"Relay, MD5", `{` + quote(sumMD5(shop)) + `:` + quote(shop) + `}`,
			[]manifest.Document{{ID: sumMD5(shop), Body: shop}}},
		{"GraphQL-over-HTTP prefixed id", `{` + quote("sha256:"+sum256(shop)) + `:` + quote(shop) + `}`,
			[]manifest.Document{{ID: "sha256:" + sum256(shop), Body: shop}}},
		{"ids of the build's own", `{"shop-v2":` + quote(shop) + `,"x-app:other":` + quote(other) + `}`,
			[]manifest.Document{{ID: "shop-v2", Body: shop}, {ID: "x-app:other", Body: other}}},
		{"a map entry named format", `{"format":` + quote(shop) + `}`,
			[]manifest.Document{{ID: "format", Body: shop}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := manifest.Parse([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("document %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// Each bad manifest is refused, naming the entry at fault (or the manifest
// as a whole, Entry "").
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, data, entry, reason string
	}{
		{"not JSON", `{"abc": "query { a }"`, "", "not a JSON object"},
		{"YAML", "abc: query { a }\n", "", "not a JSON object"},
		{"a list", `["query { a }"]`, "", "not a JSON object"},
		{"two objects", `{"a":"query { a }"} {"b":"query { b }"}`, "", "more after the object"},
		{"nothing listed", `{}`, "", "lists no documents"},
		{"Apollo, nothing listed", apolloManifest(), "", "lists no documents"},
		{"a map's id twice, two documents", `{"shop":` + quote(shop) + `,"shop":` + quote(other) + `}`, "shop", "two different documents"},
		{"Apollo's id that is no hash", apolloManifest(apolloOp("x", "Shop", shop)), "x", "not the SHA-256"},
		{"Apollo's id is not the body's SHA-256", apolloManifest(apolloOp(sum256(shop), "Other", other)), sum256(shop), "not the SHA-256 of the body"},
		{"Apollo's id in another case", apolloManifest(apolloOp(strings.ToUpper(sum256(shop)), "Shop", shop)), strings.ToUpper(sum256(shop)), "not the SHA-256"},
		{"Apollo, version 2", strings.Replace(apolloManifest(apolloOp(sum256(shop), "Shop", shop)), `"version":1`, `"version":2`, 1), "", "only version 1"},
		{"Apollo, no body", apolloManifest(`{"id":"a","name":"A","type":"query"}`), "a", "no body"},
		{"Apollo, no id", apolloManifest(`{"name":"A","type":"query","body":"{ a }"}`), "operations[0]", "no id"},
		{"Apollo, operations not a list", `{"format":"apollo-persisted-query-manifest","version":1,"operations":{}}`, "", "operations must be a list"},
		{"a SHA-256 id of another document", `{` + quote(sum256(shop)) + `:` + quote(other) + `}`, sum256(shop), "not the SHA-256 of its document"},
		{"a prefixed id of another document", `{` + quote("sha256:"+sum256(shop)) + `:` + quote(other) + `}`, "sha256:" + sum256(shop), "not the SHA-256"},
		{"an MD5 id of another document", `{` + quote(sumMD5(shop)) + `:` + quote(other) + `}`, sumMD5(shop), "not the MD5"},
		{"a SHA-1 id of another document", `{` + quote(sum1(shop)) + `:` + quote(other) + `}`, sum1(shop), "not the SHA-1"},
		{"a document that is not a string", `{"shop":{"query":"{ a }"}}`, "shop", "must be a string"},
		{"an empty document", `{"shop":"  "}`, "shop", "empty document"},
		{"an empty id", `{"":` + quote(shop) + `}`, "", "empty id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := manifest.Parse([]byte(tc.data))
			var me *manifest.Error
			if !errors.As(err, &me) {
				t.Fatalf("got %+v, %v; want a *manifest.Error", docs, err)
			}
			if me.Entry != tc.entry || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("got entry %q, %q; want entry %q and %q", me.Entry, err, tc.entry, tc.reason)
			}
		})
	}
}

// Every problem is reported at once, up to 20.
func TestParseReportsEveryProblem(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 25 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(quote(sum256(shop)) + `:` + quote(other))
	}
	b.WriteString("}")
	_, err := manifest.Parse([]byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	if n := strings.Count(err.Error(), "not the SHA-256"); n != 20 || !strings.Contains(err.Error(), "5 more problems") {
		t.Errorf("%d problems reported, want 20 and 5 more:\n%v", n, err)
	}
}
