package gqllimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/httplimit"
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

// Config configures a Limiter. Zero limits take the defaults shown.
type Config struct {
	// Limiter and Policy charge operations; Policy must be a token_bucket
	// (refunds need one). Without a Policy, operations are priced and
	// checked against the static limits only.
	Limiter *limiter.Limiter
	Policy  *limiter.Policy
	// Identity resolves who is charged (API key, tenant, plan, client IP) and
	// the store key, as the REST routes do. Required.
	Identity *httplimit.Middleware
	// Schema prices operations. In proxy mode it is the upstream's; embedded
	// in gqlgen it may be nil: the extension builds it from gqlgen's schema
	// with ComplexityOptions.
	Schema            *complexity.Schema
	ComplexityOptions []complexity.Option
	Mode              Mode
	MaxCost           int64 // 1000
	MaxDepth          int   // 15
	MaxAliases        int   // 30
	MaxFields         int   // 1000
	MaxTokens         int   // 15000
	MaxBodyBytes      int64 // 1 MiB
	// Refund gives back requested − actual after the operation ran.
	Refund bool
	// NoIntrospection makes the proxy refuse __schema and __type (embedded,
	// gqlgen's own Introspection extension decides).
	NoIntrospection bool
	// OnCost, when set, is called with the requested and (once known) the
	// actual cost of every priced operation, for metrics.
	OnCost func(kind string, cost int64)
	Clock  func() time.Time
	Logger *slog.Logger
}

// Limiter prices, charges and refunds GraphQL operations. Its Middleware
// wraps the GraphQL handler; its Extension plugs into gqlgen; Proxy serves
// an upstream.
type Limiter struct {
	cfg    Config
	mu     sync.RWMutex
	schema *complexity.Schema
}

// New checks cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Identity == nil {
		return nil, errors.New("gqllimit: Config.Identity is required")
	}
	if cfg.Policy != nil {
		if cfg.Limiter == nil {
			return nil, errors.New("gqllimit: Config.Limiter is required with a Policy")
		}
		if cfg.Policy.Algorithm != limiter.TokenBucket {
			return nil, fmt.Errorf("gqllimit: policy %q is a %s; GraphQL needs a token_bucket (refunds need one)", cfg.Policy.Name, cfg.Policy.Algorithm)
		}
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = Enforce
	case Enforce, Measure:
	default:
		return nil, fmt.Errorf("gqllimit: unknown mode %q (enforce or measure)", cfg.Mode)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if cfg.MaxCost <= 0 {
		cfg.MaxCost = 1000
	}
	def(&cfg.MaxDepth, 15)
	def(&cfg.MaxAliases, 30)
	def(&cfg.MaxFields, 1000)
	def(&cfg.MaxTokens, 15000)
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Limiter{cfg: cfg, schema: cfg.Schema}, nil
}

func (l *Limiter) pricing() *complexity.Schema {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.schema
}

// state is one request's limiting state, shared by the middleware and the
// extension through the request context.
type state struct {
	prepared *prepared // the request as the middleware read it
	id       httplimit.Identity
	dryRun   bool
	debug    bool
	priced   bool
	stats    Stats
	charged  limiter.Decision // the charge, for the refund and the headers
	status   int              // the HTTP status the middleware must answer with
	headers  bool             // rate-limit headers to write
	policy   *limiter.Policy  // the caller's bucket: Config.Policy scaled by plan
	key      string           // and its store key, resolved once per request
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

// errDryRun stops execution of a dry run; it never reaches the client.
var errDryRun = &Error{Status: http.StatusOK, Code: "COSTGATE_DRY_RUN", Message: "dry run: priced, nothing executed"}

// admit prices a validated operation and charges it. It returns nil when
// the operation may run, errDryRun for a dry run, or the rejection.
func (l *Limiter) admit(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any) *Error {
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

	var p *limiter.Policy
	key := ""
	if l.cfg.Policy != nil {
		p, key = l.bucket(st)
		st.stats.Limit = p.Capacity()
		st.stats.RestoreRate = restoreRate(p)
	}
	if st.dryRun {
		st.stats.DryRun = true
		if p != nil {
			if d, err := l.cfg.Limiter.Peek(ctx, p, key); err == nil {
				st.stats.HasBucket = true
				st.stats.Remaining = d.Remaining
				st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
			}
		}
		return errDryRun
	}
	if !measure && st.stats.Requested > l.cfg.MaxCost {
		return &Error{Status: http.StatusBadRequest, Code: CodeMaxCostExceeded,
			Message:    fmt.Sprintf("the operation costs %d, more than the maximum of %d", st.stats.Requested, l.cfg.MaxCost),
			Extensions: map[string]any{"cost": st.stats.Requested, "maxCost": l.cfg.MaxCost}}
	}
	if p == nil {
		return nil
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
			Extensions: map[string]any{"retryAfterSec": httplimit.UnavailableRetryAfter}}
	case d.ExceedsCapacity && d.Outcome == limiter.Denied:
		return &Error{Status: http.StatusBadRequest, Code: CodeCostExceedsCapacity,
			Message:    fmt.Sprintf("the operation costs %d, more than your bucket can ever hold (%d); retrying will not help", st.stats.Requested, d.Limit),
			Extensions: map[string]any{"cost": st.stats.Requested, "maximumAvailable": d.Limit}}
	case !d.Allowed:
		return &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": httplimit.RetryAfterSeconds(d)}}
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
	if !l.cfg.Refund || !st.stats.Charged || refund <= 0 || l.cfg.Policy == nil {
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
