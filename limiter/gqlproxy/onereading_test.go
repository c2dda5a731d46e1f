package gqlproxy_test

import (
	"testing"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// Proxy mode reads a request as embedded mode does: a body whose GraphQL
// members are ambiguous is refused 400 before anything is charged or
// forwarded, and a persisted query refused by a limit is not registered.
func TestProxyRefusesAmbiguousRequests(t *testing.T) {
	up := startUpstream(t)
	e := newProxyEnv(t, up.URL, func(c *gqllimit.Config) { c.PersistedQueries = gqllimit.NewPersistedQueryCache(10, 0) })
	cheap, dear := `{ __typename }`, `{ products(first: 100) { nodes { id variants(first: 100) { sku } } } }`
	r := e.raw(t, "POST", "/graphql", apqBody(cheap, sha(cheap), nil), nil)
	must(t, r.Status == 200, "registering the cheap query: %d %s", r.Status, r.Body)
	r = e.raw(t, "POST", "/graphql", apqBody(dear, sha(dear), nil), nil)
	must(t, r.Code() == gqllimit.CodeMaxCostExceeded, "the dear query: %d %s", r.Status, r.Body)
	r = e.raw(t, "POST", "/graphql", apqBody("", sha(dear), nil), nil)
	must(t, r.Code() == gqllimit.CodePersistedQueryNotFound, "the dear query was registered though refused: %d %s", r.Status, r.Body)

	calls := up.calls.Load()
	for _, body := range []string{
		`{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + sha(dear) + `","SHA256HASH":"` + sha(cheap) + `"}}}`,
		`{"query":"{ __typename }","Query":"{ products(first: 5) { nodes { id } } }"}`,
		`{"query":"{ __typename }","query":"{ products(first: 5) { nodes { id } } }"}`,
	} {
		r := e.raw(t, "POST", "/graphql", []byte(body), nil)
		must(t, r.Status == 400 && r.Code() == gqllimit.CodeBadRequest, "%s: %d %s", body, r.Status, r.Body)
	}
	must(t, up.calls.Load() == calls, "forwarded %d ambiguous requests", up.calls.Load()-calls)
}
