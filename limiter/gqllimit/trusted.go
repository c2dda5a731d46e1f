package gqllimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/gqlexec"
	"github.com/costgate/costgate/internal/manifest"
	"github.com/costgate/costgate/limiter"
)

// TrustMode says what happens to a document that is not in the trusted
// documents.
type TrustMode string

const (
	// TrustEnforce refuses it: only the listed documents run.
	TrustEnforce TrustMode = "enforce"
	// TrustLog runs it, logged (once per document) and counted
	// (TrustedDocuments.OnRequest), to see what a list would refuse before
	// enforcing it.
	TrustLog TrustMode = "log"
)

// How a request named its trusted document, as TrustedDocuments.OnRequest
// reports it.
const (
	TrustedByDocumentID = "document_id"     // documentId (GraphQL-over-HTTP persisted documents)
	TrustedByHash       = "persisted_query" // extensions.persistedQuery.sha256Hash alone
	TrustedByText       = "text"            // the document's exact text
	TrustedUnlisted     = "unlisted"        // log mode: a document the list does not hold, which runs
)

// DefaultTrustedCheckEvery is how often, at most, the requests look at
// TrustedDocuments.File for a change.
const DefaultTrustedCheckEvery = time.Second

// TrustedDocuments are the operations clients may run (Config.TrustedDocuments,
// or WithTrustedDocuments): the list a client build writes, Apollo's
// persisted query manifest or the {"id": "document"} map of Relay and
// GraphQL Codegen. A request names a listed document by documentId
// ("sha256:<hex>", or the list's id), by
// extensions.persistedQuery.sha256Hash, or by sending its exact text; in
// enforce mode anything else is refused before it is parsed, an unknown id
// with PERSISTED_QUERY_NOT_FOUND and any other document with
// PERSISTED_QUERY_NOT_IN_LIST (400, Apollo Router's codes), charged
// the rejection cost.
//
// Every listed document is parsed, validated against the schema, measured
// and priced when the list loads; one that could never run (it does not
// parse or validate, it is over the depth, alias, field or token limits, or
// its price, which no variable changes, is over MaxCost) stops the load with
// a *DocumentError naming it, and a load that fails keeps the list in effect.
// In log mode such a document is left out of the list with a warning.
// costgate then neither parses nor prices a request for a listed document
// (unless its price depends on variables: then once for each new value);
// embedded, gqlgen is handed the listed text and keeps it parsed in its
// query cache, when it has one (handler.Server.SetQueryCache, NewQueryCache).
type TrustedDocuments struct {
	// File is the list's path. It is read when the Limiter is built (embedded
	// without Config.Schema: when the extension is installed), and again when
	// it changes: at most every CheckEvery a request looks at its size,
	// modification time and inode, and a change loads it in the background.
	File string
	// Manifest is the list itself when File is "" (one built into the
	// program with go:embed, say).
	Manifest []byte
	// Mode is TrustEnforce (the default) or TrustLog.
	Mode TrustMode
	// CheckEvery is how often File is looked at (default 1s; negative:
	// never, only Limiter.ReloadTrustedDocuments reads it again).
	CheckEvery time.Duration
	// OnLoad, when set, is called after each load of the list with the
	// number of documents in effect and, for a load that failed (the list in
	// effect then stays), its error.
	OnLoad func(documents int, err error)
	// OnRequest, when set, is called for each request with how it named its
	// document (TrustedByDocumentID, TrustedByHash, TrustedByText), or
	// TrustedUnlisted for a document log mode runs although the list lacks
	// it. Refusals go to Config.OnRejection with their codes.
	OnRequest func(by string)
}

func (t *TrustedDocuments) validate() error {
	var errs []error
	if t.File == "" && len(t.Manifest) == 0 {
		errs = append(errs, &limiter.FieldError{Field: "TrustedDocuments.File", Reason: "required (or Manifest): the list of trusted documents"})
	}
	switch t.Mode {
	case "", TrustEnforce, TrustLog:
	default:
		errs = append(errs, &limiter.FieldError{Field: "TrustedDocuments.Mode", Reason: fmt.Sprintf("unknown mode %q (TrustEnforce or TrustLog)", t.Mode)})
	}
	return errors.Join(errs...)
}

// DocumentError is a trusted document that could never run, found when the
// list loaded: ID names it as the list does, Operation is the operation at
// fault ("" for the document as a whole), and Code is what a request for it
// would be answered (GRAPHQL_VALIDATION_FAILED, MAX_COST_EXCEEDED, ...).
type DocumentError struct {
	ID        string
	Operation string
	Code      string
	Message   string
}

func (e *DocumentError) Error() string {
	s := "document " + strconv.Quote(e.ID)
	if e.Operation != "" {
		s += " (operation " + e.Operation + ")"
	}
	return s + ": " + e.Code + ": " + e.Message
}

// trust is a Limiter's trusted documents: the list in effect and how it
// is kept up to date.
type trust struct {
	cfg    TrustedDocuments // defaults applied
	source string           // File, or what stands for Manifest in messages
	set    atomic.Pointer[trustedSet]

	mu      sync.Mutex  // serialises loads
	info    os.FileInfo // of File, as the list in effect was read
	sum     [32]byte    // of the content in effect
	failed  [32]byte    // of the last failure (the content, or the error reading it), reported once
	next    atomic.Int64
	looking atomic.Bool

	logMu  sync.Mutex
	logged map[[32]byte]struct{} // log mode: unlisted documents already logged
}

// maxLoggedUnlisted bounds the unlisted documents log mode remembers having
// logged; past it, new ones are only counted.
const maxLoggedUnlisted = 10_000

// trustedSet is one load of the list, read-only once built.
type trustedSet struct {
	byID   map[string]*trustedEntry // the list's ids
	bySHA  map[string]*trustedEntry // the SHA-256 (hex) of each text
	byText map[string]*trustedEntry
	size   int // documents listed
}

// trustedEntry is one listed text, parsed, validated and priced.
type trustedEntry struct {
	text string
	docs map[string]*document // by operation name; "" for the only operation
}

// lookup is the entry documentId names: the list's id as it is, or
// "sha256:" and the text's hash.
func (s *trustedSet) lookup(documentID string) *trustedEntry {
	if e := s.byID[documentID]; e != nil {
		return e
	}
	if hash, ok := strings.CutPrefix(documentID, "sha256:"); ok {
		return s.bySHA[hash]
	}
	return nil
}

func newTrust(cfg TrustedDocuments) *trust {
	if cfg.Mode == "" {
		cfg.Mode = TrustEnforce
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = DefaultTrustedCheckEvery
	}
	t := &trust{cfg: cfg, source: cfg.File}
	if cfg.File == "" {
		t.source = "the trusted documents given"
	}
	t.next.Store(time.Now().Add(cfg.CheckEvery).UnixNano())
	return t
}

// ReloadTrustedDocuments reads the trusted documents again (File, or
// Manifest) and puts them in effect; on error the list in effect stays. An
// application may call it from a signal handler of its own (costgate's
// server builds a new Limiter on SIGHUP instead). Without trusted
// documents it does nothing.
func (l *Limiter) ReloadTrustedDocuments() error {
	if l.trust == nil {
		return nil
	}
	return l.loadTrusted(l.pricing(), true)
}

// loadTrusted reads the list and, unless it is what is in effect (and not
// forced), validates and prices it with schema and puts it in effect. A
// failure is reported to OnLoad and logged; one found by a look at the file
// only once, not at every look.
func (l *Limiter) loadTrusted(schema *complexity.Schema, force bool) error {
	t := l.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	data, info := t.cfg.Manifest, os.FileInfo(nil)
	if t.cfg.File != "" {
		var err error
		if info, err = os.Stat(t.cfg.File); err == nil {
			data, err = os.ReadFile(t.cfg.File)
		}
		if err != nil {
			err = fmt.Errorf("trusted documents: %w", err)
			return t.failedLoad(l, err, sha256.Sum256([]byte(err.Error())), force)
		}
	}
	sum := sha256.Sum256(data)
	if !force && t.set.Load() != nil && sum == t.sum {
		t.info, t.failed = info, [32]byte{} // touched, or put back as it was: a failure to come is news
		return nil
	}
	set, err := l.compileTrusted(schema, data)
	if err != nil {
		return t.failedLoad(l, fmt.Errorf("trusted documents %s: %w", t.source, err), sum, force)
	}
	t.set.Store(set)
	t.info, t.sum, t.failed = info, sum, [32]byte{}
	if t.cfg.OnLoad != nil {
		t.cfg.OnLoad(set.size, nil)
	}
	return nil
}

// failedLoad reports a load that failed, the list in effect kept. A look at
// the file reports a failure once (failure is the hash of the content, or of
// the error that kept it from being read), not at every look.
func (t *trust) failedLoad(l *Limiter, err error, failure [32]byte, force bool) error {
	if !force && failure == t.failed {
		return err
	}
	t.failed = failure
	n := 0
	if set := t.set.Load(); set != nil {
		n = set.size
		l.cfg.Logger.Error("costgate: loading the trusted documents failed; the list in effect stays", "trusted_documents", t.source, "documents", n, "err", err.Error())
	}
	if t.cfg.OnLoad != nil {
		t.cfg.OnLoad(n, err)
	}
	return err
}

// look starts a look at the file in the background when CheckEvery has
// passed since the last, and none is under way.
func (t *trust) look(l *Limiter) {
	if t.cfg.File == "" || t.cfg.CheckEvery < 0 {
		return
	}
	now := time.Now().UnixNano()
	if now < t.next.Load() || !t.looking.CompareAndSwap(false, true) {
		return
	}
	t.next.Store(now + int64(t.cfg.CheckEvery))
	go func() {
		defer t.looking.Store(false)
		if t.changed() {
			_ = l.loadTrusted(l.pricing(), false) // a failure is logged and reported
		}
	}()
}

// changed reports a file that is no longer the one read: another size,
// modification time or inode (an atomic rename, a Kubernetes ConfigMap
// update), or one that cannot be read.
func (t *trust) changed() bool {
	info, err := os.Stat(t.cfg.File)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || t.info == nil {
		return true
	}
	return !os.SameFile(info, t.info) || info.Size() != t.info.Size() || !info.ModTime().Equal(t.info.ModTime())
}

// compileTrusted reads a list and parses, validates, measures and prices
// each document with schema, as a request for it would be.
func (l *Limiter) compileTrusted(schema *complexity.Schema, data []byte) (*trustedSet, error) {
	if schema == nil {
		return nil, errors.New("no schema to validate them against")
	}
	listed, err := manifest.Parse(data)
	if err != nil {
		return nil, err
	}
	set := &trustedSet{byID: make(map[string]*trustedEntry, len(listed)), bySHA: make(map[string]*trustedEntry, len(listed)),
		byText: make(map[string]*trustedEntry, len(listed))}
	var problems []error
	for _, d := range listed {
		e := set.byText[d.Body]
		if e == nil {
			var errs []*DocumentError
			if e, errs = l.compileEntry(schema, d.ID, d.Body); len(errs) > 0 {
				for _, de := range errs {
					if l.trust.cfg.Mode == TrustLog {
						l.cfg.Logger.Warn("costgate: a trusted document is left out (log mode: requests for it run as unlisted)", "trusted_documents", l.trust.source, "err", de.Error())
					} else {
						problems = append(problems, de)
					}
				}
				continue
			}
			set.byText[d.Body] = e
			sum := sha256.Sum256([]byte(d.Body))
			set.bySHA[hex.EncodeToString(sum[:])] = e
		}
		set.byID[d.ID] = e
		set.size++
	}
	if len(problems) > maxLoadProblems {
		problems = append(problems[:maxLoadProblems:maxLoadProblems], fmt.Errorf("%d more documents refused", len(problems)-maxLoadProblems))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	if set.size == 0 {
		return nil, errors.New("no document of the list can run")
	}
	return set, nil
}

// maxLoadProblems bounds the refused documents one error names.
const maxLoadProblems = 20

// compileEntry parses, validates, measures and prices one listed text.
// Problems a request could get past (over a limit in measure mode) are
// logged and the document kept; any other stops it.
func (l *Limiter) compileEntry(schema *complexity.Schema, id, text string) (*trustedEntry, []*DocumentError) {
	fail := func(op, code, format string, args ...any) []*DocumentError {
		return []*DocumentError{{ID: id, Operation: op, Code: code, Message: fmt.Sprintf(format, args...)}}
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: text}, l.cfg.MaxTokens)
	if err != nil {
		if strings.Contains(err.Error(), "exceeded token limit") {
			return nil, fail("", CodeMaxTokensExceeded, "the document has more than %d tokens", l.cfg.MaxTokens)
		}
		return nil, fail("", CodeParseFailed, "%s", gqlexec.ErrorMessage(err)+location(err))
	}
	if len(doc.Operations) == 0 {
		return nil, fail("", CodeValidationFailed, "no operation in the document")
	}
	// Measured before validation, whose overlapping-fields rule is
	// quadratic: a request would be turned away here.
	measured := make([]complexity.Limits, len(doc.Operations))
	for i, op := range doc.Operations {
		m, err := complexity.Measure(doc, op.Name)
		if err != nil {
			return nil, fail(op.Name, CodeValidationFailed, "%v", err)
		}
		measured[i] = m
		if e := l.shape(m); e != nil {
			if l.cfg.Mode != limiter.Shadow {
				return nil, fail(op.Name, e.Code, "%s", e.Message)
			}
			l.cfg.Logger.Warn("costgate: a trusted document is over a limit (measure mode: it runs)", "trusted_documents", l.trust.source, "id", id, "operation", op.Name, "code", e.Code, "reason", e.Message)
		}
	}
	if errs := validator.ValidateWithRules(schema.AST(), doc, nil); len(errs) > 0 {
		msg := errs[0].Message
		if loc := errs[0].Locations; len(loc) > 0 {
			msg += fmt.Sprintf(" (line %d, column %d)", loc[0].Line, loc[0].Column)
		}
		if len(errs) > 1 {
			msg += fmt.Sprintf(", and %d more errors", len(errs)-1)
		}
		name := ""
		if len(doc.Operations) == 1 {
			name = doc.Operations[0].Name
		}
		return nil, fail(name, CodeValidationFailed, "%s", msg)
	}
	e := &trustedEntry{text: text, docs: make(map[string]*document, len(doc.Operations)+1)}
	for i, op := range doc.Operations {
		d := &document{doc: doc, limits: measured[i]}
		// Priced with the variables left out: a price that no variable
		// changes is the price of every request, and is kept with d.
		cost, err := d.price(schema, op, nil)
		fixed := len(d.costVars) == 0
		var oe *complexity.OperationError
		switch {
		case err != nil && (fixed || !errors.As(err, &oe)):
			return nil, fail(op.Name, codeOf(err), "%v", err)
		case fixed && max(cost, 1) > l.cfg.MaxCost:
			msg := fmt.Sprintf("the operation costs %d, more than the maximum of %d", max(cost, 1), l.cfg.MaxCost)
			if l.cfg.Mode != limiter.Shadow {
				return nil, fail(op.Name, CodeMaxCostExceeded, "%s", msg)
			}
			l.cfg.Logger.Warn("costgate: a trusted document is over max_cost (measure mode: it runs)", "trusted_documents", l.trust.source, "id", id, "operation", op.Name, "reason", msg)
		}
		e.docs[op.Name] = d
		if len(doc.Operations) == 1 {
			e.docs[""] = d
		}
	}
	return e, nil
}

// codeOf is the code of a pricing error, as a request would be answered.
func codeOf(err error) string {
	var oe *complexity.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return CodeValidationFailed
}

// trustedRequest is a request's trusted document: the entry it named (nil
// for an unlisted one that log mode runs), and whether by documentId.
type trustedRequest struct {
	entry *trustedEntry
	byID  bool
}

// document is the prepared document of the listed entry for operationName,
// or the middleware's reading of query when the request named none (or an
// operation the entry lacks: that reading answers it).
func (t trustedRequest) document(l *Limiter, query, operationName string, size int) (*document, *Error) {
	if t.entry != nil {
		if d, ok := t.entry.docs[operationName]; ok {
			return d, nil
		}
	}
	return l.document(query, operationName, size)
}

// trusted resolves the trusted document of a request, before anything is
// parsed: by documentId, by a hash alone, or by its exact text. It sets
// p.Query to the listed text for a request by id or hash. In enforce mode a
// request naming nothing listed is refused (the caller charges and answers
// it); in log mode an unlisted one is counted and goes on.
func (l *Limiter) trusted(ctx context.Context, p *params) (trustedRequest, *Error) {
	t := l.trust
	if t == nil {
		if p.documentID != "" {
			return trustedRequest{}, reject(http.StatusBadRequest, CodePersistedQueryNotSupported, "this server has no persisted documents: send the query")
		}
		return trustedRequest{}, nil
	}
	set := t.set.Load()
	if set == nil {
		// Refused rather than served unchecked: the list never loaded.
		return trustedRequest{}, reject(http.StatusInternalServerError, CodeInternal, "the trusted documents are not loaded")
	}
	t.look(l)
	enforce := t.cfg.Mode == TrustEnforce
	if p.documentID != "" {
		if p.Query != "" {
			return trustedRequest{}, reject(http.StatusBadRequest, CodeBadRequest, "send documentId or query, not both")
		}
		e := set.lookup(p.documentID)
		if e == nil {
			return trustedRequest{}, reject(http.StatusBadRequest, CodePersistedQueryNotFound, "no trusted document has the id %s", quoteShort(p.documentID))
		}
		p.Query = e.text
		t.count(TrustedByDocumentID)
		return trustedRequest{entry: e, byID: true}, nil
	}
	if p.Query == "" {
		pq, _, rerr := persistedQueryOf(p.Extensions)
		if rerr != nil || pq == nil || pq.Sha256Hash == "" {
			return trustedRequest{}, nil // the reading goes on and answers it
		}
		if e := set.bySHA[pq.Sha256Hash]; e != nil {
			p.Query = e.text // persisted checks it against the hash and hands it on
			t.count(TrustedByHash)
			return trustedRequest{entry: e}, nil
		}
		if enforce {
			return trustedRequest{}, reject(http.StatusBadRequest, CodePersistedQueryNotFound, "no trusted document has the hash %s", quoteShort(pq.Sha256Hash))
		}
		if apq := l.cfg.PersistedQueries; apq != nil {
			if q, ok := apq.Get(ctx, pq.Sha256Hash); ok {
				t.unlisted(l, q, p.OperationName)
			}
		}
		return trustedRequest{}, nil
	}
	if e := set.byText[p.Query]; e != nil {
		t.count(TrustedByText)
		return trustedRequest{entry: e}, nil
	}
	if enforce {
		return trustedRequest{}, reject(http.StatusBadRequest, CodePersistedQueryNotInList, "the operation is not among the trusted documents")
	}
	t.unlisted(l, p.Query, p.OperationName)
	return trustedRequest{}, nil
}

func (t *trust) count(by string) {
	if t.cfg.OnRequest != nil {
		t.cfg.OnRequest(by)
	}
}

// unlisted counts a document log mode runs although the list lacks it, and
// logs it the first time.
func (t *trust) unlisted(l *Limiter, query, operationName string) {
	t.count(TrustedUnlisted)
	sum := sha256.Sum256([]byte(query))
	t.logMu.Lock()
	_, seen := t.logged[sum]
	full := len(t.logged) >= maxLoggedUnlisted
	if !seen && !full {
		if t.logged == nil {
			t.logged = make(map[[32]byte]struct{})
		}
		t.logged[sum] = struct{}{}
	}
	t.logMu.Unlock()
	if !seen && !full {
		l.cfg.Logger.Warn("costgate: an operation that is not among the trusted documents ran (log mode); enforce mode would refuse it",
			"trusted_documents", t.source, "operation", operationName, "sha256", hex.EncodeToString(sum[:]))
	}
}

// quoteShort quotes a client's id for a message, cut to 80 bytes.
func quoteShort(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strconv.Quote(s)
}

// untrusted answers a request the trusted documents refused (it returns
// what prepare returns): charged as a document refused before it ran is,
// to who pays, unless the refusal is costgate's own fault.
func (l *Limiter) untrusted(w http.ResponseWriter, r *http.Request, st *state, size int, e *Error) (*state, *http.Request, []byte, *Error) {
	switch {
	case e.Status >= http.StatusInternalServerError:
		return nil, r, nil, e // costgate's fault: nothing charged
	case st.id == nil:
		return nil, r, nil, identityUnavailable()
	case l.refusesKey(st.id):
		l.unknownKey(w, r, st)
		return nil, r, nil, nil
	}
	st.read = readingCost(complexity.Limits{}, size)
	return st, r, nil, l.refuse(r.Context(), st, e)
}

// fillDocument hands gqlgen the listed text of a request that named its
// trusted document by documentId, which gqlgen does not know: it finds no
// query in the body, and runs the text costgate priced (its query cache
// then spares it the parse).
func fillDocument(ctx context.Context, p *graphql.RawParams) {
	if st := stateFrom(ctx); st != nil && st.byID && p.Query == "" {
		p.Query = st.op.Query
	}
}

// trustedStreamed resolves the trusted document of an operation a websocket
// connection started, as trusted does for a request: by its hash alone
// (p.Query is then set to the listed text) or by its exact text. The caller
// charges a refusal as any other before execution.
func (l *Limiter) trustedStreamed(p *graphql.RawParams) (trustedRequest, *Error) {
	t := l.trust
	if t == nil {
		return trustedRequest{}, nil
	}
	set := t.set.Load()
	if set == nil {
		return trustedRequest{}, reject(http.StatusInternalServerError, CodeInternal, "the trusted documents are not loaded")
	}
	t.look(l)
	var e *Error
	if p.Query == "" {
		pq, _ := p.Extensions["persistedQuery"].(map[string]any)
		hash, _ := pq["sha256Hash"].(string)
		if entry := set.bySHA[hash]; entry != nil {
			p.Query = entry.text
			delete(p.Extensions, "persistedQuery") // resolved: nothing after costgate looks it up again
			t.count(TrustedByHash)
			return trustedRequest{entry: entry}, nil
		}
		if hash == "" || t.cfg.Mode == TrustLog {
			return trustedRequest{}, nil // the reading goes on and answers it
		}
		e = reject(http.StatusBadRequest, CodePersistedQueryNotFound, "no trusted document has the hash %s", quoteShort(hash))
	} else if entry := set.byText[p.Query]; entry != nil {
		t.count(TrustedByText)
		return trustedRequest{entry: entry}, nil
	} else if t.cfg.Mode == TrustLog {
		t.unlisted(l, p.Query, p.OperationName)
		return trustedRequest{}, nil
	} else {
		e = reject(http.StatusBadRequest, CodePersistedQueryNotInList, "the operation is not among the trusted documents")
	}
	return trustedRequest{}, e
}

// location is " (line L, column C)" of a gqlparser error, or "".
func location(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) && len(ge.Locations) > 0 {
		return fmt.Sprintf(" (line %d, column %d)", ge.Locations[0].Line, ge.Locations[0].Column)
	}
	return ""
}
