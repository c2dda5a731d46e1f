package gqllimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/identity"
)

// Mode says whether cost limits are enforced.
type Mode string

const (
	// Enforce rejects and throttles. The default.
	Enforce Mode = "enforce"
	// Measure rejects nothing for cost, depth, aliases, fields or throttling
	// (body and token limits still apply); the charge runs as in shadow mode,
	// so metrics and extensions.cost show what enforcement would do.
	Measure Mode = "measure"
)

// Defaults of Config's limits, taken when a field is zero.
const (
	DefaultMaxCost      = 1000
	DefaultMaxDepth     = 15
	DefaultMaxAliases   = 30
	DefaultMaxFields    = 1000
	DefaultMaxTokens    = 15000
	DefaultMaxBodyBytes = 1 << 20
)

// Config configures a Limiter. Limiter, Policy and Identity are required;
// the zero value of every other field takes the default its comment gives
// (a negative limit is refused).
type Config struct {
	// Limiter and Policy charge operations; Policy must be a token_bucket
	// (refunds need one).
	Limiter *limiter.Limiter
	Policy  *limiter.Policy
	// Identity says who is charged (API key, tenant, plan, client address)
	// and builds the store key. It may be shared with httplimit: an
	// identity resolved by one door is reused by the next.
	Identity *identity.Resolver
	// Schema prices operations. In proxy mode it is the upstream's; embedded
	// in gqlgen it may be nil: the extension builds it from gqlgen's schema
	// with ComplexityOptions.
	Schema            *complexity.Schema
	ComplexityOptions []complexity.Option
	Limits
	// OnCost, when set, is called with the requested and (once known) the
	// actual cost of every priced operation, for metrics.
	OnCost func(kind string, cost int64)
	// Clock is the time for resetAt and X-RateLimit-Reset (default time.Now).
	Clock  func() time.Time
	Logger *slog.Logger // default slog.Default()
}

// Limits are the static limits and the mode. The zero value of each takes
// its default; a negative one is refused.
type Limits struct {
	// Mode is Enforce (default) or Measure.
	Mode         Mode
	MaxCost      int64 // default 1000
	MaxDepth     int   // default 15
	MaxAliases   int   // default 30
	MaxFields    int   // default 1000: fields selected, fragments expanded
	MaxTokens    int   // default 15000: the parser's token limit
	MaxBodyBytes int64 // default 1 MiB
	// NoRefund keeps what was charged even when the operation returned less
	// than it asked for (by default requested − actual is refunded).
	NoRefund bool
	// NoIntrospection makes the proxy refuse __schema and __type (embedded,
	// gqlgen's own Introspection extension decides).
	NoIntrospection bool
}

// Validate reports every problem of c, joined, as *limiter.FieldError values.
func (c *Limits) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch c.Mode {
	case "", Enforce, Measure:
	default:
		fail("Mode", "unknown mode %q (enforce or measure)", c.Mode)
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"MaxCost", c.MaxCost}, {"MaxDepth", int64(c.MaxDepth)}, {"MaxAliases", int64(c.MaxAliases)},
		{"MaxFields", int64(c.MaxFields)}, {"MaxTokens", int64(c.MaxTokens)}, {"MaxBodyBytes", c.MaxBodyBytes},
	} {
		if f.value < 0 {
			fail(f.name, "must not be negative, got %d (0 takes the default)", f.value)
		}
	}
	return errors.Join(errs...)
}

// CheckPolicy reports whether p can charge GraphQL operations: a
// token_bucket, since refunds need one. The error is a *limiter.PolicyError.
func CheckPolicy(p *limiter.Policy) error {
	if p.Algorithm != limiter.TokenBucket {
		return &limiter.PolicyError{Policy: p.Name, Field: "algorithm",
			Reason: fmt.Sprintf("%s; GraphQL needs a token_bucket (refunds need one)", p.Algorithm)}
	}
	return nil
}

// Validate reports every problem of c, joined: each is a *limiter.FieldError
// naming the field, or the *limiter.PolicyError of Policy.
func (c *Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Limiter == nil {
		fail("Limiter", "required")
	}
	if c.Identity == nil {
		fail("Identity", "required: it says who pays (identity.New)")
	}
	if c.Policy == nil {
		fail("Policy", "required: without a policy no operation is charged, and GraphQL is not limited")
	} else if err := CheckPolicy(c.Policy); err != nil {
		errs = append(errs, err)
	} else if c.Identity != nil {
		if err := c.Identity.CheckPolicy(c.Policy); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Limiter prices, charges and refunds GraphQL operations. [Limiter.Handler]
// serves a gqlgen server behind it; [Limiter.Middleware] and
// [Limiter.Extension] are its two halves; package gqlproxy serves any
// upstream through it.
type Limiter struct {
	cfg       Config
	mu        sync.RWMutex
	schema    *complexity.Schema
	installed atomic.Bool // the extension was added to a gqlgen server
	executor  atomic.Bool // a handler of costgate's own (gqlproxy) admits operations
}

// New checks cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gqllimit: %w", err)
	}
	if cfg.Mode == "" {
		cfg.Mode = Enforce
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.MaxCost == 0 {
		cfg.MaxCost = DefaultMaxCost
	}
	def(&cfg.MaxDepth, DefaultMaxDepth)
	def(&cfg.MaxAliases, DefaultMaxAliases)
	def(&cfg.MaxFields, DefaultMaxFields)
	def(&cfg.MaxTokens, DefaultMaxTokens)
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Limiter{cfg: cfg, schema: cfg.Schema}, nil
}

// Handler installs the extension in srv and returns srv wrapped in the
// middleware: the whole cost limit, nothing to forget.
func (l *Limiter) Handler(srv *handler.Server) http.Handler {
	srv.Use(l.Extension())
	return l.Middleware(srv)
}

// Config returns the configuration in effect, defaults applied.
func (l *Limiter) Config() Config { return l.cfg }

// MarkExecutor is called by a handler of costgate's own that admits
// operations itself through Admit (gqlproxy), in place of the extension.
func (l *Limiter) MarkExecutor() { l.executor.Store(true) }

func (l *Limiter) pricing() *complexity.Schema {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.schema
}

// state is one request's limiting state, shared by the middleware and the
// extension through the request context.
type state struct {
	op      *Operation // the request as the middleware read it
	id      *identity.Identity
	dryRun  bool
	debug   bool
	priced  bool
	stats   Stats
	charged limiter.Decision // the charge, for the refund and the headers
	status  int              // the HTTP status the middleware must answer with
	headers bool             // rate-limit headers to write
	policy  *limiter.Policy  // the caller's bucket: Config.Policy scaled by plan
	key     string           // and its store key, resolved once per request
}

// bucket returns the caller's policy and store key, resolving them (plan
// scaling, the keyed hash of the identity) once for the charge and the refund.
func (l *Limiter) bucket(st *state) (*limiter.Policy, string) {
	if st.policy == nil {
		st.policy = l.cfg.Identity.PolicyFor(l.cfg.Policy, st.id.Plan)
		st.key = l.cfg.Identity.Key(l.cfg.Policy, st.id)
	}
	return st.policy, st.key
}

type stateKey struct{}

func withState(ctx context.Context, st *state) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateFrom(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// Error is a GraphQL error costgate answers with, before or instead of
// execution.
type Error struct {
	Status     int
	Code       string
	Message    string
	Extensions map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func reject(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrDryRun is what Admit returns for a dry run: priced, nothing charged,
// nothing to execute. It never reaches the client as an error.
var ErrDryRun = &Error{Status: http.StatusOK, Code: "COSTGATE_DRY_RUN", Message: "dry run: priced, nothing executed"}

// admit prices a validated operation and charges it. It returns nil when
// the operation may run, ErrDryRun for a dry run, or the rejection.
func (l *Limiter) admit(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any) *Error {
	rerr := l.price(ctx, st, op, vars)
	if rerr != nil && rerr != ErrDryRun {
		st.status = rerr.Status
	}
	return rerr
}

func (l *Limiter) price(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any) *Error {
	schema := l.pricing()
	if schema == nil {
		return reject(http.StatusInternalServerError, "INTERNAL", "costgate: no schema to price operations with")
	}
	var opts []complexity.AnalyzeOption
	if st.debug {
		opts = append(opts, complexity.WithBreakdown())
	}
	res, err := schema.AnalyzeOperation(op, vars, opts...)
	if err != nil {
		var oe *complexity.OperationError
		if errors.As(err, &oe) {
			return &Error{Status: http.StatusBadRequest, Code: oe.Code, Message: oe.Error(), Extensions: map[string]any{"field": oe.Field, "path": oe.Path}}
		}
		return reject(http.StatusBadRequest, CodeValidationFailed, "%v", err)
	}
	measure := l.cfg.Mode == Measure
	st.priced = true
	st.stats.Requested = max(res.Cost, 1)
	st.stats.Fields = res.Breakdown
	if l.cfg.OnCost != nil {
		l.cfg.OnCost("requested", st.stats.Requested)
	}
	if isDryRunField(op, vars) {
		st.dryRun = true
	}

	p, key := l.bucket(st)
	st.stats.Limit = p.Capacity()
	st.stats.RestoreRate = restoreRate(p)
	if st.dryRun {
		st.stats.DryRun = true
		if d, err := l.cfg.Limiter.Peek(ctx, p, key); err == nil {
			st.stats.HasBucket = true
			st.stats.Remaining = d.Remaining
			st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
		}
		return ErrDryRun
	}
	if !measure && st.stats.Requested > l.cfg.MaxCost {
		return &Error{Status: http.StatusBadRequest, Code: CodeMaxCostExceeded,
			Message:    fmt.Sprintf("the operation costs %d, more than the maximum of %d", st.stats.Requested, l.cfg.MaxCost),
			Extensions: map[string]any{"cost": st.stats.Requested, "maxCost": l.cfg.MaxCost}}
	}
	if measure {
		shadow := *p
		shadow.Mode = limiter.Shadow
		p = &shadow
	}
	d := l.cfg.Limiter.Allow(ctx, p, key, st.stats.Requested)
	st.stats.HasBucket = d.Err == nil || d.Outcome == limiter.ErrorLocal
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	st.charged = d
	st.headers = p.EffectiveMode() != limiter.Shadow
	switch {
	case d.Outcome == limiter.ErrorDenied:
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLimiterUnavailable,
			Message:    "the rate limiter cannot reach its store, and GraphQL fails closed; retry shortly",
			Extensions: map[string]any{"retryAfterSec": header.UnavailableRetryAfter}}
	case d.ExceedsCapacity && d.Outcome == limiter.Denied:
		return &Error{Status: http.StatusBadRequest, Code: CodeCostExceedsCapacity,
			Message:    fmt.Sprintf("the operation costs %d, more than your bucket can ever hold (%d); retrying will not help", st.stats.Requested, d.Limit),
			Extensions: map[string]any{"cost": st.stats.Requested, "maximumAvailable": d.Limit}}
	case !d.Allowed:
		return &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}
	}
	st.stats.Charged = d.Receipt.Cost > 0 && d.Outcome == limiter.Allowed
	return nil
}

// finish records the actual cost of an operation that ran and refunds what
// it did not use. data is the response's "data" member.
func (l *Limiter) finish(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any, data []byte) {
	if !st.priced || st.dryRun {
		return
	}
	actual, err := l.pricing().ActualJSON(op, vars, data)
	if err != nil {
		l.cfg.Logger.Warn("costgate: actual cost", "err", err)
		actual = st.stats.Requested // no refund on doubt
	}
	st.stats.Actual = &actual
	if l.cfg.OnCost != nil {
		l.cfg.OnCost("actual", actual)
	}
	// Every operation costs at least 1, whatever it returned.
	refund := st.stats.Requested - max(actual, 1)
	if l.cfg.NoRefund || !st.stats.Charged || refund <= 0 {
		return
	}
	p, key := l.bucket(st)
	d, err := l.cfg.Limiter.Refund(ctx, p, key, refund)
	if err != nil {
		l.cfg.Logger.Warn("costgate: refund", "policy", p.Name, "err", err)
		return
	}
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	st.charged.Remaining, st.charged.ResetAfter = d.Remaining, d.ResetAfter
}

// isDryRunField reports a root rateLimit(dryRun: true) field, GitHub's way
// of asking what a query would cost.
func isDryRunField(op *ast.OperationDefinition, vars map[string]any) bool {
	if op.Operation != ast.Query {
		return false
	}
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || f.Name != "rateLimit" {
			continue
		}
		if a := f.Arguments.ForName("dryRun"); a != nil {
			if v, err := a.Value.Value(vars); err == nil && v == true {
				return true
			}
		}
	}
	return false
}

// headerTrue reports a request header set to 1 or true.
func headerTrue(r *http.Request, name string) bool {
	v := strings.TrimSpace(r.Header.Get(name))
	return v == "1" || strings.EqualFold(v, "true")
}
