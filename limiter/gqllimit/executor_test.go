package gqllimit_test

import (
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/internal/gqltest"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/memstore"
)

// An executor's Derived state is built once per document and operation
// name, and again for another text or name, or with the cache off.
func TestOperationDerived(t *testing.T) {
	sdl, err := os.ReadFile("../../graph/schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := complexity.LoadSDL("schema.graphqls", string(sdl))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cache  int
		builds int64
	}{{"cached", 0, 3}, {"no cache", -1, 5}} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := limiter.New(memstore.New(nil))
			ids, _ := identity.New(identity.Config{HashKey: []byte("derived-test-hash-key")})
			gl, err := gqllimit.New(gqllimit.Config{Limiter: lim, Policy: graphqlPolicy(), Identity: ids, Schema: schema,
				DocumentCache: tc.cache, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var builds atomic.Int64
			h := gl.Middleware(executor(func(w http.ResponseWriter, r *http.Request) {
				op := gqlexec.From(r.Context())
				got := op.Derived(func() any { builds.Add(1); return op.Query() + "#" + op.OperationName() })
				if got != op.Query()+"#"+op.OperationName() {
					t.Errorf("Derived = %v for %q", got, op.Query())
				}
				w.Write([]byte(`{"data":null}`))
			}))
			c := gqltest.Client{Handler: h}
			q := `query A { __typename } query B { __typename }`
			for _, name := range []string{"A", "A", "B", "A"} {
				c.Raw(t, "POST", "/graphql", []byte(`{"query":"`+q+`","operationName":"`+name+`"}`), nil)
			}
			c.Post(t, `{ products(first: 1) { nodes { id } } }`, nil, nil)
			if got := builds.Load(); got != tc.builds {
				t.Errorf("built %d times, want %d", got, tc.builds)
			}
		})
	}
}

// executor is a handler that executes operations itself (gqlexec.Executor).
type executor func(http.ResponseWriter, *http.Request)

func (e executor) ServeHTTP(w http.ResponseWriter, r *http.Request) { e(w, r) }
func (executor) ExecutesOperations()                                {}
