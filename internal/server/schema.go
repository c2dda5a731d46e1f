package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/limiter/gqllimit"
	"github.com/costgate/costgate/limiter/gqlproxy"
	"github.com/costgate/costgate/limiter/header"
)

// Retries of a first introspection that failed: the server is not ready
// until one succeeds, so it tries again soon, backing off.
const (
	firstRetry    = time.Second
	maxFirstRetry = 30 * time.Second
)

// introspectionTimeout bounds one introspection call.
const introspectionTimeout = 30 * time.Second

// schemaSource serves proxy mode over the upstream's schema read by
// introspection (graphql.schema: introspect): at start, then every
// graphql.schema_refresh, graphql.costs applied over each schema read. A
// read that fails keeps the last good schema. Until a first schema is read
// it answers 503 SCHEMA_UNAVAILABLE, and the server is not ready.
type schemaSource struct {
	cfg     *config.Config
	logger  *slog.Logger
	metrics *metrics
	client  *http.Client
	// build makes the proxy handler that prices with a schema.
	build func(*complexity.Schema) (http.Handler, error)

	mu      sync.Mutex // serialises reads
	last    *ast.Schema
	priced  *complexity.Schema
	unknown []string // the overlay entries the last schema lacks, warned about once

	handler  atomic.Pointer[http.Handler] // nil until a first schema is read
	ready    chan struct{}                // closed once it is
	readyOne sync.Once

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

func newSchemaSource(cfg *config.Config, logger *slog.Logger, m *metrics, build func(*complexity.Schema) (http.Handler, error)) *schemaSource {
	return &schemaSource{
		cfg: cfg, logger: logger, metrics: m, build: build,
		client: &http.Client{
			Timeout: introspectionTimeout,
			// The introspection headers are for the upstream, and no one else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ready: make(chan struct{}),
		done:  make(chan struct{}),
	}
}

func (src *schemaSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := src.handler.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	src.metrics.rejection(gqlproxy.CodeSchemaUnavailable)
	w.Header().Set(header.RetryAfter, strconv.Itoa(header.UnavailableRetryAfter))
	// No limiter runs yet (it is built over the schema): a plain GraphQL error.
	gqlexec.WriteResponse(w, http.StatusServiceUnavailable, gqlexec.Response{Data: json.RawMessage("null"), Errors: []any{&gqlerror.Error{
		Message: "the upstream's schema has not been read yet; retry shortly", Extensions: map[string]any{"code": gqlproxy.CodeSchemaUnavailable}}}})
}

// isReady reports whether a schema was read.
func (src *schemaSource) isReady() bool { return src.handler.Load() != nil }

// seed installs the schema another source (of the config this one
// replaces) read last, so that a reload does not make the server unready;
// the new config's overlay must fit it.
func (src *schemaSource) seed(prev *schemaSource) error {
	if prev == nil || prev.cfg.GraphQL.Upstream != src.cfg.GraphQL.Upstream ||
		!maps.Equal(prev.cfg.GraphQL.IntrospectionHeaders, src.cfg.GraphQL.IntrospectionHeaders) {
		return nil
	}
	prev.mu.Lock()
	last := prev.last
	prev.mu.Unlock()
	if last == nil {
		return nil
	}
	return src.install(last)
}

// start reads the schema in the background until stop.
func (src *schemaSource) start() {
	ctx, cancel := context.WithCancel(context.Background())
	src.cancel = cancel
	go src.run(ctx)
}

// stop ends the background reads and waits for them.
func (src *schemaSource) stop() {
	src.stopOnce.Do(func() {
		if src.cancel == nil {
			close(src.done)
			return
		}
		src.cancel()
		<-src.done
	})
}

func (src *schemaSource) run(ctx context.Context) {
	defer close(src.done)
	retry := firstRetry
	for {
		src.read(ctx)
		next := src.cfg.GraphQL.SchemaRefresh
		if !src.isReady() {
			next, retry = retry, min(2*retry, maxFirstRetry)
		} else if next == 0 {
			return // at start only
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// read introspects the upstream once and installs what it read. A failure
// is logged and counted, and the last good schema stays.
func (src *schemaSource) read(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, introspectionTimeout)
	defer cancel()
	schema, err := gqlproxy.Introspect(ctx, src.client, src.cfg.GraphQL.Upstream, src.cfg.IntrospectionHeader())
	if err == nil {
		err = src.install(schema)
	}
	if err != nil && parent.Err() == nil { // not a read cut short by stop
		src.metrics.schemaRefreshErrors.Inc()
		msg := "costgate: reading the upstream's schema failed; the last good schema stays"
		if !src.isReady() {
			msg = "costgate: reading the upstream's schema failed; not ready until it is read"
		}
		src.logger.Error(msg, "upstream", src.cfg.GraphQL.Upstream, "err", err.Error())
	}
	return err
}

// install prices with schema, the overlay applied, and swaps the proxy
// over to it. The first schema must have every coordinate the overlay
// names (a typo is refused with its line); a later one may have dropped
// some: those entries are left out with a warning, and the schema is used.
func (src *schemaSource) install(schema *ast.Schema) error {
	src.mu.Lock()
	defer src.mu.Unlock()
	costs := src.cfg.Costs()
	var unknown []string
	if src.last != nil {
		unknown = costs.Unknown(schema)
	}
	if !slices.Equal(unknown, src.unknown) {
		for _, key := range unknown {
			e := src.cfg.SchemaErrors(&complexity.SchemaError{Coordinate: key, InCosts: true,
				Message: "the upstream's schema has no such coordinate; the entry is left out until it has"}, "graphql.costs")
			src.logger.Warn("costgate: "+e.Error(), "upstream", src.cfg.GraphQL.Upstream)
		}
	}
	opts := append(src.cfg.ComplexityOptions(), complexity.WithCosts(costs.Without(unknown...)))
	priced, err := complexity.NewSchema(schema, opts...)
	if err != nil {
		return src.cfg.SchemaErrors(err, "the upstream's schema")
	}
	h, err := src.build(priced)
	if err != nil {
		return err
	}
	if src.last != nil {
		src.logChanges(src.last, schema, src.priced, priced)
	}
	src.last, src.priced, src.unknown = schema, priced, unknown
	src.handler.Store(&h)
	src.readyOne.Do(func() {
		close(src.ready)
		src.logger.Info("costgate: the upstream's schema was read", "upstream", src.cfg.GraphQL.Upstream, "types", len(schema.Types))
	})
	return nil
}

// logChanges logs what a schema read again changed: types and fields added
// or removed, and the cost settings that changed.
func (src *schemaSource) logChanges(old, cur *ast.Schema, oldPriced, curPriced *complexity.Schema) {
	var attrs []any
	add := func(key string, items []string) {
		if len(items) > 0 {
			attrs = append(attrs, key, items)
		}
	}
	add("types_added", typesOnlyIn(cur, old))
	add("types_removed", typesOnlyIn(old, cur))
	add("fields_added", fieldsOnlyIn(cur, old))
	add("fields_removed", fieldsOnlyIn(old, cur))
	add("costs_changed", costChanges(oldPriced.CostSettings(), curPriced.CostSettings()))
	if len(attrs) > 0 {
		src.logger.Info("costgate: the upstream's schema changed", append(attrs, "upstream", src.cfg.GraphQL.Upstream)...)
	}
}

func typesOnlyIn(a, b *ast.Schema) []string {
	var out []string
	for name, def := range a.Types {
		if !def.BuiltIn && b.Types[name] == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// fieldsOnlyIn lists the fields (and arguments) of a's types that b's same
// types lack.
func fieldsOnlyIn(a, b *ast.Schema) []string {
	var out []string
	for name, def := range a.Types {
		other := b.Types[name]
		if def.BuiltIn || other == nil {
			continue
		}
		for _, f := range def.Fields {
			of := other.Fields.ForName(f.Name)
			if of == nil {
				out = append(out, name+"."+f.Name)
				continue
			}
			for _, arg := range f.Arguments {
				if of.Arguments.ForName(arg.Name) == nil {
					out = append(out, name+"."+f.Name+"("+arg.Name+":)")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// costChanges lists "coordinate: before -> after" for each setting that
// differs.
func costChanges(before, after map[string]string) []string {
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	var out []string
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		b, a := before[key], after[key]
		if a == b {
			continue
		}
		if b == "" {
			b = "none"
		}
		if a == "" {
			a = "none"
		}
		out = append(out, key+": "+b+" -> "+a)
	}
	return out
}

// introspected is the proxy handler of graphql.schema: introspect. It takes
// effect with swapSchemas.
func (s *Server) introspected(cfg *config.Config, gcfg gqllimit.Config) (http.Handler, error) {
	build := func(schema *complexity.Schema) (http.Handler, error) {
		c := gcfg
		c.Schema = schema
		gl, err := gqllimit.New(c)
		if err != nil {
			return nil, err
		}
		return gqlproxy.New(gqlproxy.Config{Limiter: gl, Upstream: cfg.GraphQL.Upstream, Logger: s.logger})
	}
	src := newSchemaSource(cfg, s.logger, s.metrics, build)
	if err := src.seed(s.schemas); err != nil {
		return nil, err
	}
	s.nextSchemas = src
	return src, nil
}

// swapSchemas puts the schema source build made in effect, and stops the
// one it replaces. Called with s.mu held, or from New.
func (s *Server) swapSchemas() {
	old := s.schemas
	s.schemas, s.nextSchemas = s.nextSchemas, nil
	if s.schemas != nil {
		s.schemas.start()
	}
	if old != nil {
		old.stop()
	}
}
