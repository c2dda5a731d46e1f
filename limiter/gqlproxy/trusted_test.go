package gqlproxy_test

import (
	"encoding/json"
	"testing"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// Proxy mode serves the trusted documents as the embedded server does: a
// listed document named by documentId or by its hash is forwarded in full,
// priced as its text; an unlisted one never reaches the upstream, refused
// with its code and charged the rejection cost.
func TestProxyTrustedDocuments(t *testing.T) {
	up := startUpstream(t)
	shop := "query Shop($n: Int) { products(first: $n) { nodes { id variants(first: 2) { id } } } }"
	cheap := "{ __typename }"
	ops := []map[string]string{}
	for _, body := range []string{shop, cheap} {
		ops = append(ops, map[string]string{"id": sha(body), "name": "", "type": "query", "body": body})
	}
	manifest, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	e := newProxyEnv(t, up.URL, func(c *gqllimit.Config) {
		c.TrustedDocuments = &gqllimit.TrustedDocuments{Manifest: manifest}
	})
	byText := e.post(t, shop, map[string]any{"n": 3}, nil)
	must(t, byText.Status == 200 && len(byText.Res.Errors) == 0, "by text: %d %s", byText.Status, byText.Body)
	for name, body := range map[string]string{
		"documentId": `{"documentId":"sha256:` + sha(shop) + `","variables":{"n":3}}`,
		"hash":       `{"variables":{"n":3},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sha(shop) + `"}}}`,
	} {
		calls := up.calls.Load()
		r := e.raw(t, "POST", "/graphql", []byte(body), nil)
		must(t, r.Status == 200 && len(r.Res.Errors) == 0, "by %s: %d %s", name, r.Status, r.Body)
		must(t, up.calls.Load() == calls+1, "by %s: the upstream was called %d times", name, up.calls.Load()-calls)
		must(t, r.Cost(t).RequestedQueryCost == byText.Cost(t).RequestedQueryCost, "by %s: requestedQueryCost %d, the text's is %d",
			name, r.Cost(t).RequestedQueryCost, byText.Cost(t).RequestedQueryCost)
		must(t, string(r.Res.Data) == string(byText.Res.Data), "by %s: data %s, the text's is %s", name, r.Res.Data, byText.Res.Data)
	}
	for _, tc := range []struct{ body, code string }{
		{`{"query":"{ products(first: 1) { nodes { id } } }"}`, gqllimit.CodePersistedQueryNotInList},
		{`{"documentId":"sha256:` + sha("{ x }") + `"}`, gqllimit.CodePersistedQueryNotFound},
	} {
		before, calls := e.available(t), up.calls.Load()
		r := e.raw(t, "POST", "/graphql", []byte(tc.body), nil)
		must(t, r.Status == 400 && r.Code() == tc.code, "%s: %d %s, want 400 %s", tc.body, r.Status, r.Body, tc.code)
		must(t, up.calls.Load() == calls, "%s reached the upstream", tc.body)
		must(t, before-e.available(t) == 1, "%s: charged %d, want 1", tc.body, before-e.available(t))
	}
}
