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

	"github.com/costgate/costgate/internal/gqlpolicy"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/costgate/costgate/internal/gqlvalidate"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/header"
	"github.com/costgate/costgate/limiter/identity"
)

// Defaults of Config's limits, taken when a field is zero.
const (
	DefaultMaxCost      = 1000
	DefaultMaxDepth     = 15
	DefaultMaxAliases   = 30
	DefaultMaxFields    = 1000
	DefaultMaxTokens    = 15000
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxSubscriptions is the number of subscriptions one key may
	// have open at once.
	DefaultMaxSubscriptions = 10
	// DefaultRejectionCost is what a request refused before execution is
	// charged (see Limits.RejectionCost).
	DefaultRejectionCost = 1
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
	// OnRejection, when set, is called once for each operation costgate or
	// gqlgen refused to run, with its code (errors[0].extensions.code), for
	// metrics. In measure mode (Mode limiter.Shadow) it is also called, once per operation, with
	// the code enforcement would have answered (cost, depth, aliases, fields,
	// throttling), though the operation runs.
	OnRejection func(code string)
	// OnOperation, when set, is called once per operation whose document
	// parsed, when costgate is done with it (dry runs excepted), with its
	// name, its estimated and actual cost and its rejection code: for
	// per-operation metrics. Rejections before the document parsed (body,
	// batch, parse errors) have no operation and reach OnRejection alone.
	OnOperation func(OperationEvent)
	// PersistedQueries turns on Automatic Persisted Queries (Apollo's
	// extensions.persistedQuery protocol): a query sent with its sha256Hash
	// is registered once its hash checks out, and later requests may send
	// the hash alone. The middleware serves the protocol itself, embedded
	// and in proxy mode: it resolves the hash and hands the handler the
	// query in full, without the persistedQuery extension, so the text it
	// priced is the text that runs (do not install gqlgen's
	// AutomaticPersistedQuery as well: the extension refuses an operation
	// that something after the middleware changed). A query is registered
	// only once its operation was charged. Nil: a request with a hash alone
	// is answered PERSISTED_QUERY_NOT_SUPPORTED.
	// NewPersistedQueryCache makes one bounded in memory.
	PersistedQueries graphql.Cache[string]
	// TrustedDocuments, when set, are the only operations clients may run
	// (or, in log mode, the ones that run without a word): see
	// [TrustedDocuments]. New refuses a list whose documents could never
	// run; embedded without Schema, the extension checks it when installed.
	TrustedDocuments *TrustedDocuments
	// DocumentCache is how many documents the middleware keeps parsed,
	// measured and priced, keyed by their text and operation name (default
	// 1000, within 64 MiB of estimated memory;
	// negative: none). A document sent again, in full or by its persisted
	// hash, is not parsed, measured or priced again unless the variables its
	// price depends on (complexity.Schema.CostVariables) take new values.
	DocumentCache int
	// Clock is the time for resetAt and X-RateLimit-Reset (default time.Now).
	Clock  func() time.Time
	Logger *slog.Logger // default slog.Default()
}

// Limits are the static limits and the mode. The zero value of each takes
// its default; a negative one is refused.
type Limits struct {
	// Mode is limiter.Enforce (default), or limiter.Shadow to measure:
	// reject nothing for cost, depth, aliases, fields or throttling (body
	// and token limits still apply) and charge as a shadow-mode policy, so
	// that metrics and extensions.cost show what enforcement would do.
	Mode         limiter.Mode
	MaxCost      int64 // default 1000
	MaxDepth     int   // default 15
	MaxAliases   int   // default 30
	MaxFields    int   // default 1000: fields selected, fragments expanded
	MaxTokens    int   // default 15000: the parser's token limit
	MaxBodyBytes int64 // default 1 MiB
	// MaxSubscriptions bounds the subscriptions (websocket or SSE) one key
	// has open at once, in this process (default 10); over it a subscription
	// is refused with TOO_MANY_SUBSCRIPTIONS, nothing charged.
	MaxSubscriptions int
	// NoRefund keeps what was charged even when the operation returned less
	// than it asked for (by default requested − actual is refunded).
	NoRefund bool
	// FreeSubscriptionEvents sends a subscription's events without charging
	// them: a subscription then costs its price when it opens, however many
	// events it sends and whatever they cost (by default each event's actual
	// cost is taken from the bucket as it is sent, and a subscription whose
	// bucket cannot pay ends with THROTTLED).
	FreeSubscriptionEvents bool
	// NoIntrospection refuses operations that select __schema or __type,
	// after pricing: INTROSPECTION_DISABLED (400), embedded and in proxy
	// mode. (Embedded, gqlgen answers introspection only with its
	// Introspection extension installed.) Error messages then suggest no
	// names of the schema ("Did you mean ...?").
	NoIntrospection bool
	// RejectionCost is charged for a request refused before execution (a
	// body too large, a batch, a document that does not parse, breaks a
	// limit or does not validate, an operation over max_cost or the
	// bucket's capacity; default 1), or what reading the request cost when
	// that is more (see docs/graphql.md, "The gateway's own work"): the work
	// a refused request causes is never free. A throttled request is charged
	// nothing, so that a client that retries recovers.
	RejectionCost int64
}

// Validate reports every problem of c, joined, as *limiter.FieldError values.
func (c *Limits) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch c.Mode {
	case "", limiter.Enforce, limiter.Shadow:
	default:
		fail("Mode", "unknown mode %q (limiter.Enforce or limiter.Shadow)", c.Mode)
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"MaxCost", c.MaxCost}, {"MaxDepth", int64(c.MaxDepth)}, {"MaxAliases", int64(c.MaxAliases)},
		{"MaxFields", int64(c.MaxFields)}, {"MaxTokens", int64(c.MaxTokens)}, {"MaxBodyBytes", c.MaxBodyBytes},
		{"MaxSubscriptions", int64(c.MaxSubscriptions)}, {"RejectionCost", c.RejectionCost},
	} {
		if f.value < 0 {
			fail(f.name, "must not be negative, got %d (0 takes the default)", f.value)
		}
	}
	return errors.Join(errs...)
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
	} else if err := gqlpolicy.Check(c.Policy); err != nil {
		errs = append(errs, err)
	} else {
		if c.Identity != nil {
			if err := c.Identity.CheckPolicy(c.Policy); err != nil {
				errs = append(errs, err)
			}
		}
		if c.Limiter != nil {
			if err := c.Limiter.CheckPolicy(c.Policy); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TrustedDocuments != nil {
		if err := c.TrustedDocuments.validate(); err != nil {
			errs = append(errs, err)
		}
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
	validates *ast.Schema             // gqlgen's schema, that documents are validated against; nil: schema's
	docs      *lru[docKey, *document] // nil: no document cache
	subs      openSubscriptions
	trust     *trust      // nil without Config.TrustedDocuments
	installed atomic.Bool // the extension was added to a gqlgen server
	executor  atomic.Bool // a handler of costgate's own (gqlproxy) admits operations
	// keyless: the API-key header is no identity (Handler without
	// WithIdentity, whose embedder configured no key): a request sending
	// one is limited by its address like any other, not answered 401.
	keyless bool
}

// refusesKey reports an API key to answer 401: one the Resolver does not
// know, when the embedder configured API keys.
func (l *Limiter) refusesKey(id *identity.Identity) bool { return id.UnknownKey && !l.keyless }

// New checks cfg and returns a Limiter. It refuses a setup that would
// charge nothing: no Limiter or Identity, no Policy, or a Policy that is not
// a token_bucket (refunds need one) or has no key. The caller is worked out
// by cfg.Identity, shared with the other doors: an identity httplimit
// resolved earlier in the chain is read back from the context, not worked
// out again.
//
// [Limiter.Middleware] and [Limiter.Extension] are the two halves: the
// middleware reads and checks each request and writes the HTTP status and
// headers, the extension prices, charges and refunds inside gqlgen.
// [Limiter.Handler] installs both; package gqlproxy serves the same
// middleware in front of any GraphQL upstream.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gqllimit: %w", err)
	}
	if cfg.Mode == "" {
		cfg.Mode = limiter.Enforce
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
	def(&cfg.MaxSubscriptions, DefaultMaxSubscriptions)
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RejectionCost == 0 {
		cfg.RejectionCost = DefaultRejectionCost
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Limiter{cfg: cfg, schema: cfg.Schema}
	if cfg.DocumentCache >= 0 {
		l.docs = newLRU[docKey, *document](orDefault(cfg.DocumentCache, defaultCacheEntries), defaultCacheBytes)
	}
	if cfg.TrustedDocuments != nil {
		l.trust = newTrust(*cfg.TrustedDocuments)
		if cfg.Schema != nil {
			if err := l.loadTrusted(cfg.Schema, true); err != nil {
				return nil, fmt.Errorf("gqllimit: %w", err)
			}
		}
	}
	return l, nil
}

// Handler installs the extension in srv and returns srv wrapped in the
// middleware: the whole cost limit, nothing to forget. It also gives srv
// costgate's reading of each document ([Limiter.QueryCache]), so that gqlgen
// runs the document the middleware parsed, measured and validated without
// parsing or validating it again, and the same rules should gqlgen ever
// validate one itself (linear in the document; no suggestions with
// NoIntrospection). The cache replaces one set before.
func (l *Limiter) Handler(srv *handler.Server) http.Handler {
	srv.Use(l.Extension())
	srv.SetQueryCache(l.QueryCache())
	srv.SetValidationRulesFn(func() *rules.Rules { return gqlvalidate.Rules(!l.cfg.NoIntrospection) })
	srv.SetDisableSuggestion(l.cfg.NoIntrospection)
	return l.Middleware(srv)
}

// Config returns the configuration in effect, defaults applied.
func (l *Limiter) Config() Config { return l.cfg }

func (l *Limiter) pricing() *complexity.Schema {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.schema
}

// state is one request's limiting state, shared by the middleware and the
// extension through the request context.
type state struct {
	lim        *Limiter
	op         *operation // the request as the middleware read it; nil until its document parsed
	doc        *document  // and its document, cached or not
	id         *identity.Identity
	dryRun     bool // asked for a dry run: the header, or rateLimit(dryRun: true); stats.DryRun once answered as one
	dryRunData bool // rateLimit(dryRun: true) without the header: data.rateLimit is answered
	debug      bool
	priced     bool
	admitted   bool   // admitted to run: an error after this is not a rejection
	settled    bool   // its actual cost was recorded and the refund made
	rejected   bool   // the rejection was recorded
	code       string // and its code
	wouldBe    string // measure mode: the first rejection enforcement would have answered
	stats      Stats
	decision   limiter.Decision // the charge (or, when nothing was charged, a peek), for the refund and the headers
	status     int              // the HTTP status the middleware must answer with
	headers    bool             // rate-limit headers to write
	policy     *limiter.Policy  // the caller's bucket: Config.Policy scaled by plan (and by an override)
	key        string           // and its store key, resolved once per request
	req        limiter.Request  // both, and the operators' override that applies
	register   string           // the persisted-query hash to register the query under once it was charged
	byID       bool             // a trusted document named by documentId: gqlgen is handed its text (fillDocument)
	floor      int64            // what reading the request costs, in tokens: the least an operation that runs is charged (readingCost)
	read       int64            // what reading it took so far, in tokens: the least a refusal is charged
	refused    bool             // a refusal was charged (refuse): once per request
	size       int              // the request's bytes
	valid      bool             // the document validated (the middleware's reading, which gqlgen then runs)
	errs       gqlerror.List    // the validation errors answered, for a websocket's error message
	slot       *slot            // an open subscription's place among its key's
	exec       *execution       // counts the operation as gqlgen runs it, once admitted (embedded)
	events     events           // a subscription's events, charged as they are sent
	conn       *connection      // the websocket connection that started the operation; nil over HTTP
	reported   sync.Once        // an operation of a websocket connection is reported once
}

// bucket returns the caller's policy and store key, resolving them (plan
// scaling, the keyed hash of the identity) once for the charge and the refund.
func (l *Limiter) bucket(st *state) (*limiter.Policy, string) {
	if st.policy == nil {
		st.req = l.cfg.Identity.Request(l.cfg.Policy, st.id, 0)
		st.policy, st.key = st.req.Policy, st.req.Key
	}
	return st.policy, st.key
}

// charge charges cost to the caller's bucket under p (the bucket's policy,
// or a shadow copy of it), honouring the operators' override.
func (l *Limiter) charge(ctx context.Context, st *state, p *limiter.Policy, cost int64) limiter.Decision {
	l.bucket(st)
	r := st.req
	r.Policy, r.Cost = p, cost
	return l.cfg.Limiter.Check(ctx, r)
}

// Error is a GraphQL error costgate answers with, before or instead of
// execution.
type Error struct {
	Status     int
	Code       string
	Message    string
	Extensions map[string]any

	errs gqlerror.List // a document that did not validate: every error, answered in place of Message
	cost int64         // a document that did not parse: what reading it cost, in tokens
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func reject(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// blocked is the answer to a caller an operator's deny override blocks.
func blocked() *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeBlocked, Message: "blocked by the operators of this API"}
}

// errDryRun is what admit returns for a dry run: priced, nothing charged,
// nothing to execute. It never reaches the client as an error.
var errDryRun = &Error{Status: http.StatusOK, Code: "COSTGATE_DRY_RUN", Message: "dry run: priced, nothing executed"}

// admit prices a validated operation and charges it. It returns nil when
// the operation may run, errDryRun for a dry run, or the rejection (recorded).
func (l *Limiter) admit(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any) *Error {
	rerr := l.price(ctx, st, op, vars)
	switch {
	case rerr == nil:
		st.admitted = true
		return nil
	case rerr != errDryRun:
		l.rejected(ctx, st, rerr)
	}
	st.slot.release() // refused after its slot was taken (throttled, say)
	st.slot = nil
	return rerr
}

func (l *Limiter) price(ctx context.Context, st *state, op *ast.OperationDefinition, vars map[string]any) *Error {
	schema := l.pricing()
	if schema == nil {
		return reject(http.StatusInternalServerError, CodeInternal, "costgate: no schema to price operations with")
	}
	cost, fields, err := l.analyze(st, schema, op, vars)
	if err != nil {
		var oe *complexity.OperationError
		if errors.As(err, &oe) {
			return l.refuse(ctx, st, &Error{Status: http.StatusBadRequest, Code: oe.Code, Message: oe.Error(), Extensions: map[string]any{"field": oe.Field, "path": oe.Path}})
		}
		return l.refuse(ctx, st, reject(http.StatusBadRequest, CodeValidationFailed, "%v", err))
	}
	measure := l.cfg.Mode == limiter.Shadow
	st.priced = true
	// Never cheaper than reading it (readingCost): the whole document's
	// fields, nodes and bytes.
	st.stats.Requested = max(cost, st.floor, 1)
	st.stats.Fields = fields
	if l.cfg.OnCost != nil {
		l.cfg.OnCost("requested", st.stats.Requested)
	}
	if l.cfg.NoIntrospection && introspects(op, vars) {
		return l.refuse(ctx, st, reject(http.StatusBadRequest, CodeIntrospectionDisabled, "introspection is disabled"))
	}
	if isDryRunField(op, vars) {
		st.dryRunData = !st.dryRun // the header asks for nothing but extensions.cost
		st.dryRun = true
	}

	p, key := l.bucket(st)
	st.stats.Limit = p.Capacity()
	st.stats.RestoreRate = restoreRate(p)
	if o := st.req.Override; o != nil && o.Action == limiter.ActionDeny {
		return blocked() // a blocked caller is not answered a dry run either
	}
	if st.dryRun {
		st.stats.DryRun = true
		l.peek(ctx, st)
		return errDryRun
	}
	if st.stats.Requested > l.cfg.MaxCost {
		e := &Error{Status: http.StatusBadRequest, Code: CodeMaxCostExceeded,
			Message:    fmt.Sprintf("the operation costs %d, more than the maximum of %d", st.stats.Requested, l.cfg.MaxCost),
			Extensions: map[string]any{"cost": st.stats.Requested, "maxCost": l.cfg.MaxCost}}
		if !measure {
			return l.refuse(ctx, st, e)
		}
		l.wouldReject(st, e)
	}
	if e := l.openSlot(st, op, key); e != nil {
		return e
	}
	if measure {
		shadow := *p
		shadow.Mode = limiter.Shadow
		p = &shadow
	}
	d := l.charge(ctx, st, p, st.stats.Requested)
	st.stats.HasBucket = d.HasState()
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	st.decision = d
	st.headers = p.EffectiveMode() != limiter.Shadow
	exceeds := func() *Error {
		return &Error{Status: http.StatusBadRequest, Code: CodeCostExceedsCapacity,
			Message:    fmt.Sprintf("the operation costs %d, more than your bucket can ever hold (%d); retrying will not help", st.stats.Requested, d.Limit),
			Extensions: map[string]any{"cost": st.stats.Requested, "maximumAvailable": d.Limit}}
	}
	throttled := func() *Error {
		return &Error{Status: http.StatusTooManyRequests, Code: CodeThrottled, Message: "Throttled",
			Extensions: map[string]any{"retryAfterSec": header.RetryAfterSeconds(d)}}
	}
	switch {
	case d.Outcome == limiter.ErrorDenied:
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeLimiterUnavailable,
			Message:    "the rate limiter cannot reach its store, and GraphQL fails closed; retry shortly",
			Extensions: map[string]any{"retryAfterSec": header.UnavailableRetryAfter}}
	case d.Outcome == limiter.Blocked:
		return blocked()
	case d.ExceedsCapacity && d.Outcome == limiter.Denied:
		return l.refuse(ctx, st, exceeds())
	case !d.Allowed:
		return throttled()
	case d.Outcome == limiter.ShadowDenied && d.ExceedsCapacity:
		l.wouldReject(st, exceeds())
	case d.Outcome == limiter.ShadowDenied:
		l.wouldReject(st, throttled())
	}
	st.stats.Charged = d.Receipt.Cost > 0 && d.Outcome == limiter.Allowed
	return nil
}

// analyze prices op: from the document's cache of prices when the
// variables the price depends on take values seen before, else afresh (and
// then kept). The breakdown of Costgate-Cost-Debug is always worked out.
func (l *Limiter) analyze(st *state, schema *complexity.Schema, op *ast.OperationDefinition, vars map[string]any) (int64, []complexity.FieldCost, error) {
	if st.debug {
		res, err := schema.AnalyzeOperation(op, vars, complexity.WithBreakdown())
		return res.Cost, res.Breakdown, err
	}
	if st.doc == nil {
		res, err := schema.AnalyzeOperation(op, vars)
		return res.Cost, nil, err
	}
	cost, err := st.doc.price(schema, op, vars)
	return cost, nil, err
}

// rejected records a rejection of the operation st stands for (st may be
// nil before the request was read): it is counted once, its status kept,
// and, when the document parsed and nothing was charged, the caller's
// bucket is read for extensions.cost.throttleStatus.
func (l *Limiter) rejected(ctx context.Context, st *state, e *Error) {
	if st != nil {
		if st.rejected {
			return
		}
		st.rejected = true
		st.code = e.Code
		st.status = e.Status
		if st.op != nil && st.id != nil && !st.stats.HasBucket {
			l.peek(ctx, st)
		}
	}
	if l.cfg.OnRejection != nil {
		l.cfg.OnRejection(e.Code)
	}
}

// wouldReject records, in measure mode, the first rejection enforcement
// would have answered: counted like a rejection and logged, while the
// operation goes on.
func (l *Limiter) wouldReject(st *state, e *Error) {
	if st.wouldBe != "" {
		return
	}
	st.wouldBe = e.Code
	if l.cfg.OnRejection != nil {
		l.cfg.OnRejection(e.Code)
	}
	l.cfg.Logger.Info("costgate: enforcement would reject this operation (measure mode)", "code", e.Code, "reason", e.Message)
}

// peek reads the caller's bucket without charging it, for throttleStatus
// and the rate-limit headers of an answer that charged nothing.
func (l *Limiter) peek(ctx context.Context, st *state) {
	p, key := l.bucket(st)
	st.stats.Limit = p.Capacity()
	st.stats.RestoreRate = restoreRate(p)
	d, err := l.cfg.Limiter.Peek(ctx, p, key)
	if err != nil {
		return
	}
	st.stats.HasBucket = true
	st.stats.Remaining = d.Remaining
	st.stats.ResetAt = l.cfg.Clock().Add(d.ResetAfter)
	if st.decision.Policy == nil && l.cfg.Mode != limiter.Shadow && p.EffectiveMode() != limiter.Shadow {
		st.decision, st.headers = d, true
	}
}

// finish records the actual cost of an operation that ran, as its execution
// counted it, and refunds what it did not use.
func (l *Limiter) finish(ctx context.Context, st *state) {
	if !st.priced || st.dryRun {
		return
	}
	actual, err := st.exec.cost()
	l.settle(ctx, st, actual, err)
}

// headerTrue reports a request header set to 1 or true.
func headerTrue(r *http.Request, name string) bool {
	v := strings.TrimSpace(r.Header.Get(name))
	return v == "1" || strings.EqualFold(v, "true")
}
