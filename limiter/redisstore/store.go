// Package redisstore is the limiter.Store shared by every gateway through
// Redis: standalone, Sentinel or Cluster, through any go-redis v9 client.
// Each algorithm is one Lua script (lua/*.lua, embedded), so a check is one
// round trip and atomic, with no check-then-act between gateways.
//
//	store, err := redisstore.Open(redisstore.ClientOptions{URL: "redis://127.0.0.1:6379/0"}, nil)
//
// docs/redis.md says how checks travel, what keys look like and cost, what
// local-first policies (limiter.Policy.Sync) may overshoot, and how to size
// and run Redis for them.
package redisstore

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/loggate"
	"github.com/costgate/costgate/limiter"
)

// DefaultKeyPrefix starts every key unless Options.KeyPrefix says otherwise.
const DefaultKeyPrefix = "rl:"

// Defaults of Options.
const (
	DefaultPipelines        = 16
	DefaultMaxBatch         = 128
	DefaultBreakerThreshold = 5
	DefaultProbeInterval    = 50 * time.Millisecond
)

// Options configures a Store. nil is ready to use.
type Options struct {
	// KeyPrefix starts every key (default "rl:").
	KeyPrefix string
	// Clock, when set, replaces Redis TIME (tests). Production leaves it nil so
	// that every gateway shares the server's clock.
	Clock func() time.Time
	// Pipelines bounds the pipelines each node has in flight at once
	// (default 16). Four run always, each carrying the checks queued while
	// the others travel; when a check has waited a tenth of its budget
	// (1-5ms) for one, another starts, so that on a slow Redis no check
	// waits for another's round trip. Those end after idling a second.
	Pipelines int
	// MaxBatch bounds the checks sent in one pipeline (default 128).
	MaxBatch int
	// ReplyWait bounds how long a pipeline waits for its replies, well past
	// the store timeout, so that late replies keep their connection (default
	// 3s). Checks themselves wait only until their context's deadline.
	ReplyWait time.Duration
	// BreakerThreshold is the number of consecutive failures after which a
	// node's breaker opens (default 5); ProbeInterval is how often a probe
	// then goes through (default 50ms).
	BreakerThreshold int
	ProbeInterval    time.Duration
	// GatewayID names this gateway to the other gateways sharing
	// local-first policies (limiter.Policy.Sync); default: random per Store.
	GatewayID string
	// OnRoundTrip, when set, is called for each round trip to Redis that
	// carries checks or syncs (a pipeline is one), e.g. to count them. It
	// runs on the hot path: it must be quick and must not block.
	OnRoundTrip func(RoundTrip)
	// Logger receives what the store has to say outside any check: a last
	// sync that failed, Redis's eviction policy (default slog.Default()).
	Logger *slog.Logger
	// AllowEviction opens the store over a Redis whose maxmemory-policy
	// evicts keys (anything but noeviction), or cannot be read, with a
	// warning instead of an *EvictionError. Every key the store writes has
	// a TTL, so volatile-* policies evict them too, and each eviction
	// resets a limit. Evictions are counted either way (Health).
	AllowEviction bool
}

// Store is a limiter.Store backed by Redis. Close stops it.
//
// The scripts take the time from Redis TIME, one clock for all gateways
// (unless Options.Clock is injected for tests); they compute in integers;
// every key they write carries a TTL no longer than its state needs; and all
// keys of one identity share a hash tag, so one Cluster slot. A script is
// never retried by the client library: go-redis resends a command whose
// reply was lost, which would run the script (and charge) twice, so scripts
// go out as commands (and pipelines) marked NoRetry; EVALSHA falls back to
// EVAL on NOSCRIPT.
//
// Checks go to the node that owns the key: the one server of a standalone
// or Sentinel client, or the master of the key's slot in a Cluster. While
// Redis answers fast and no pipeline is out, a check makes its round trip
// itself (a store from [Open] only: its connections tell a late read from a
// late reply). Otherwise it goes through the node's queue: a few workers
// send whatever is queued as one pipeline. Each node has its own breaker: a
// failing master affects only the keys it owns. A check waits for its reply only
// until its context's deadline; the pipeline waits on, up to ReplyWait, so a
// late reply is read and its connection kept. A reply already waiting in a
// socket when the deadline passes (the gateway short of CPU, not Redis
// slow) is not a timeout. In a Cluster the slot map is refreshed on the
// first error from a node and every 100ms while one fails, so a failover is
// followed as soon as Redis has promoted a replica. A node's breaker opens
// after a few consecutive failures and lets a probe through every 50ms, so
// checks skip a node for no longer than it fails plus about one probe.
//
// Every key carries a TTL, so a Redis at maxmemory evicts them under any
// maxmemory-policy but noeviction, and each eviction resets a limit: a store
// refuses to open over such a node with an [*EvictionError] unless
// [Options.AllowEviction], reads each node's policy and evictions again on
// new connections and every [InfoInterval], and reports them in
// [Store.Health]. The store's own dialer keeps go-redis's dial gate open, so
// the first check after Redis is back succeeds (dial.go). For a Cluster, set
// cluster-require-full-coverage no on the servers: with the default, every
// master refuses all keys while one shard fails over.
type Store struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // set for a Cluster client
	prefix  string
	clock   func() time.Time
	scripts map[limiter.Algorithm]*script
	multi   *script
	consts  sync.Map // *limiter.Policy → []any: its period, limit and capacity, boxed once

	pipelines, maxBatch, breakerThreshold int
	replyWait, probeInterval              time.Duration

	conns     *connSet
	ownDialer bool // the client is NewClient's, its dialer registers conns
	// needDeadline: the client's reads have no timeout of their own, so a
	// pipeline's context carries ReplyWait.
	needDeadline bool
	callTimeout  atomic.Int64 // ns; 0: only the context bounds a check
	ownsClient   bool
	single       *node // every check, unless Cluster
	mu           sync.Mutex
	nodes        map[string]*node // Cluster masters by address
	stop         chan struct{}
	lf           *localFirst // the local-first policies (localfirst.go)
	onRoundTrip  func(RoundTrip)
	logger       *slog.Logger
	stopOnce     sync.Once
	// What the store read of each node's INFO (eviction.go), by address.
	memMu         sync.Mutex
	mem           map[string]*nodeMemory
	memNow        chan struct{} // asks the watch for a read now
	allowEviction bool
	opened        atomic.Bool // checkEviction let it open
	evictLog      loggate.Gate
	wg            sync.WaitGroup
	adminFields   // admin.go: resets and overrides shared by the gateways
}

var _ limiter.Store = (*Store)(nil)

//go:embed lua/*.lua
var luaFiles embed.FS

type script struct {
	name, src, sha string
	shaArg, srcArg any // boxed once
}

// algCodes number the algorithms for the multi-policy script.
var algCodes = map[limiter.Algorithm]int{
	limiter.TokenBucket: 1, limiter.LeakyBucket: 2, limiter.SlidingLog: 3, limiter.SlidingWindow: 4, limiter.FixedWindow: 5,
	limiter.Concurrency: 6,
}

// loadScripts builds one script per algorithm and the multi-policy script
// from the embedded Lua.
func (s *Store) loadScripts() error {
	read := func(name string) (string, error) {
		b, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return "", fmt.Errorf("redisstore: %w", err)
		}
		return string(b), nil
	}
	prelude, err := read("prelude")
	if err != nil {
		return err
	}
	multi, err := read("multi")
	if err != nil {
		return err
	}
	all := prelude
	for _, alg := range append(limiter.Algorithms(), limiter.Concurrency) {
		body, err := read(string(alg))
		if err != nil {
			return err
		}
		all += "\n" + body
		// One policy: ARGV now, period, limit, capacity, cost, undo (0|1),
		// receipt ref, window offset. Concurrency takes its lease in the
		// period's place and an operation in undo's (0 take, 1 release, 2
		// renew).
		undo := "ARGV[6] == '1'"
		if alg == limiter.Concurrency {
			undo = "tonumber(ARGV[6])"
		}
		src := prelude + "\n" + body + "\nlocal r, w = " + string(alg) +
			"(KEYS[1], KEYS[2], clock(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), " + undo + ", ARGV[7], tonumber(ARGV[8]))\n" +
			"if w then w() end\nreturn r\n"
		s.scripts[alg] = newScript(string(alg), src)
	}
	s.multi = newScript("multi", all+"\n"+multi)
	return nil
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	sc := &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
	sc.shaArg, sc.srcArg = sc.sha, sc.src
	return sc
}

var errClosed = errors.New("redisstore: store closed")

// New returns a Store over client: a *redis.Client (standalone or Sentinel),
// a *redis.ClusterClient or a *redis.Ring. A client whose options leave
// ContextTimeoutEnabled off is refused: go-redis would then ignore the
// deadline of a pipeline on a hung socket. [NewClient] builds a client set
// up for the store; [Open] builds both.
func New(client redis.UniversalClient, opts *Options) (*Store, error) {
	return newStore(client, opts, nil)
}

// newStore is New; conns, when set, already knows the client's connections
// (its dialer registers them), else a dial hook starts registering them now.
// Validate reports the first problem of o as a *limiter.FieldError.
func (o *Options) Validate() error {
	if strings.ContainsAny(o.KeyPrefix, "{}") {
		// A brace in the prefix would become every key's hash tag: one Cluster slot for all.
		return &limiter.FieldError{Field: "KeyPrefix", Reason: fmt.Sprintf("must not contain { or }, got %q", o.KeyPrefix)}
	}
	if o.Pipelines < 0 || o.MaxBatch < 0 || o.ReplyWait < 0 || o.BreakerThreshold < 0 || o.ProbeInterval < 0 {
		return &limiter.FieldError{Field: "redisstore.Options", Reason: "Pipelines, MaxBatch, ReplyWait, BreakerThreshold and ProbeInterval must not be negative"}
	}
	return nil
}

func newStore(client redis.UniversalClient, opts *Options, conns *connSet) (*Store, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	s := &Store{
		client: client, prefix: DefaultKeyPrefix, scripts: make(map[limiter.Algorithm]*script),
		pipelines: DefaultPipelines, maxBatch: DefaultMaxBatch, replyWait: DefaultReplyWait,
		breakerThreshold: DefaultBreakerThreshold, probeInterval: DefaultProbeInterval,
		conns: newConnSet(), nodes: make(map[string]*node), stop: make(chan struct{}),
		mem: make(map[string]*nodeMemory), memNow: make(chan struct{}, 1),
	}
	if opts != nil {
		if err := opts.Validate(); err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		if opts.KeyPrefix != "" {
			s.prefix = opts.KeyPrefix
		}
		s.clock = opts.Clock
		set := func(dst *int, v int) {
			if v > 0 {
				*dst = v
			}
		}
		set(&s.pipelines, opts.Pipelines)
		set(&s.maxBatch, opts.MaxBatch)
		set(&s.breakerThreshold, opts.BreakerThreshold)
		if opts.ReplyWait > 0 {
			s.replyWait = opts.ReplyWait
		}
		if opts.ProbeInterval > 0 {
			s.probeInterval = opts.ProbeInterval
		}
		s.onRoundTrip = opts.OnRoundTrip
		s.logger = opts.Logger
		s.allowEviction = opts.AllowEviction
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if err := s.loadScripts(); err != nil {
		return nil, err
	}
	var gateway string
	if opts != nil {
		gateway = opts.GatewayID
	}
	lf, err := newLocalFirst(s, gateway)
	if err != nil {
		return nil, err
	}
	s.lf = lf
	switch c := client.(type) {
	case interface{ Options() *redis.Options }:
		s.needDeadline = c.Options().ReadTimeout <= 0
	case interface{ Options() *redis.ClusterOptions }:
		s.needDeadline = c.Options().ReadTimeout <= 0
	default:
		s.needDeadline = true
	}
	if conns != nil {
		s.conns, s.ownDialer = conns, true
	} else {
		client.AddHook(s.conns.hook())
	}
	// Ready the pools before the first check (bounded: a Redis that is down
	// now must not hold the gateway's start).
	const warmBound = time.Second
	if cc, ok := client.(*redis.ClusterClient); ok {
		s.cluster = cc
		ctx, cancel := context.WithTimeout(context.Background(), warmBound)
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			s.addNode(c).warm(warmBound)
			return nil
		})
		cancel()
		s.wg.Add(1)
		go s.followCluster()
	} else {
		s.single = newNode(s, "", client)
		s.single.warm(warmBound)
	}
	// Redis's eviction policy, now and from now on (eviction.go).
	if err := s.checkEviction(); err != nil {
		s.Close()
		return nil, err
	}
	s.opened.Store(true)
	readSoon := s.readSoon
	s.conns.onDial.Store(&readSoon)
	s.wg.Add(1)
	go s.watchMemory()
	return s, nil
}

// BoundCalls is how a Limiter hands the store its timeout: every check waits at most
// timeout for its reply (less when its context's deadline comes first).
func (s *Store) BoundCalls(timeout time.Duration) { s.callTimeout.Store(int64(timeout)) }

// Client returns the client the store sends to.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Close stops the store's workers; a store made by [Open] also closes its
// client. Checks after Close fail. A store with local-first policies first
// pushes what it granted since its last sync and gives its leases back, in
// one last sync bounded by the store timeout.
func (s *Store) Close() error {
	s.stopOnce.Do(func() {
		s.lf.closed.Store(true) // no more local grants
		close(s.stop)
		s.wg.Wait() // the sync loop has ended
		s.lf.last()
	})
	s.wg.Wait()
	if s.ownsClient {
		return s.client.Close()
	}
	return nil
}

// nodeFor returns the node that owns key's slot.
func (s *Store) nodeFor(ctx context.Context, key string) (*node, error) {
	if s.single != nil {
		return s.single, nil
	}
	c, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.addNode(c), nil
}

// addNode returns the node of a Cluster master, made on first sight and
// warmed in the background, its client kept current.
func (s *Store) addNode(c *redis.Client) *node {
	addr := c.Options().Addr
	s.mu.Lock()
	n := s.nodes[addr]
	fresh := n == nil
	if fresh {
		n = newNode(s, addr, c)
		s.nodes[addr] = n
	}
	s.mu.Unlock()
	if fresh {
		go n.warm(s.replyWait)
		s.readSoon()
	} else if src := n.src.Load(); src.c != pipeliner(c) {
		n.src.Store(&pipeSource{c})
	}
	return n
}

// followCluster refreshes the slot map while a node fails: the map moves
// when Redis promotes a replica, and a node whose breaker is open sees no
// traffic that would tell.
func (s *Store) followCluster() {
	defer s.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		failing := false
		for _, n := range s.nodes {
			if n.failedAt.Load() != 0 || n.br.isOpen() {
				failing = true
			}
		}
		s.mu.Unlock()
		if failing {
			s.cluster.ReloadState(context.Background())
		}
	}
}

// runCluster runs a script through the Cluster client, which follows MOVED
// and ASK itself; used once a node has answered that the slot is elsewhere.
func (s *Store) runCluster(ctx context.Context, sc *script, args []any) ([]int64, error) {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	s.countRoundTrip(RoundTripExact)
	err := s.cluster.Process(ctx, noRetryCmd{cmd})
	if isNoScript(err) {
		cmd = redis.NewIntSliceCmd(ctx, sc.eval(args)...)
		s.countRoundTrip(RoundTripExact)
		err = s.cluster.Process(ctx, noRetryCmd{cmd})
	}
	return cmd.Val(), err
}

func checkClient(client redis.UniversalClient) error {
	const msg = "redisstore: the Redis client must set ContextTimeoutEnabled, or a hung Redis blocks checks past the store timeout"
	switch c := client.(type) {
	case nil:
		return errors.New("redisstore: nil client")
	case interface{ Options() *redis.Options }:
		if !c.Options().ContextTimeoutEnabled {
			return errors.New(msg)
		}
	case interface{ Options() *redis.ClusterOptions }:
		if !c.Options().ContextTimeoutEnabled {
			return errors.New(msg)
		}
	}
	return nil
}

// tag is the hash tag of key's state under p, shared by all its keys: a
// digest of the policy's name and the key ({name:key} would make every key
// as long as its policy name and identity; the digest is 16 characters
// whatever they are, 96 bits of SHA-256).
func tag(p *limiter.Policy, key string) [tagLen]byte {
	var buf [128]byte
	b := append(append(append(buf[:0], p.Name...), 0), key...)
	sum := sha256.Sum256(b)
	var t [tagLen]byte
	base64.RawURLEncoding.Encode(t[:], sum[:tagLen*3/4])
	return t
}

// redisKey is one key of the state tagged t: the prefix, {t}, the suffix.
func (s *Store) redisKey(t *[tagLen]byte, suffix string) string {
	return s.prefix + "{" + string(t[:]) + "}" + suffix
}

// tagLen is the length of the hash tag's digest, in base64 characters.
const tagLen = 16

// suffixes end each algorithm's keys, after the hash tag: one letter, so a
// policy whose algorithm changes never reads state of another format.
var suffixes = map[limiter.Algorithm][]string{
	limiter.TokenBucket:   {"t"},
	limiter.LeakyBucket:   {"l"},
	limiter.SlidingLog:    {"g", "m"},
	limiter.SlidingWindow: {"s"},
	limiter.FixedWindow:   {"f"},
	limiter.Concurrency:   {"c"},
}

// Keys returns the Redis keys holding key's state under p. All share the
// hash tag, so one Cluster slot.
func (s *Store) Keys(p *limiter.Policy, key string) []string {
	t := tag(p, key)
	if p.Sync > 0 {
		return []string{s.redisKey(&t, syncSuffix)}
	}
	var keys []string
	for _, suffix := range suffixes[p.Algorithm] {
		keys = append(keys, s.redisKey(&t, suffix))
	}
	return keys
}

// Take implements limiter.Store.
func (s *Store) Take(ctx context.Context, p *limiter.Policy, key string, cost int64) (limiter.Decision, error) {
	if cost < 0 {
		return limiter.Decision{}, fmt.Errorf("redisstore: negative cost %d", cost)
	}
	if p.Sync > 0 {
		return s.lf.take(ctx, p, key, cost)
	}
	return s.run(ctx, p, key, cost, "take", limiter.Receipt{})
}

// Undo implements limiter.Store.
func (s *Store) Undo(ctx context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if r.Cost < 0 {
		return limiter.Decision{}, fmt.Errorf("redisstore: negative undo cost %d", r.Cost)
	}
	if p.Sync > 0 {
		return s.lf.undo(p, key, r)
	}
	return s.run(ctx, p, key, 0, "undo", r)
}

var _ limiter.Renewer = (*Store)(nil)

// Renew implements limiter.Renewer: one round trip running concurrency.lua.
func (s *Store) Renew(ctx context.Context, p *limiter.Policy, key string, r limiter.Receipt) (limiter.Decision, error) {
	if p.Algorithm != limiter.Concurrency {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("only concurrency holds are renewed, not %s", p.Algorithm)}
	}
	return s.run(ctx, p, key, 0, "renew", r)
}

func (s *Store) run(ctx context.Context, p *limiter.Policy, key string, cost int64, op string, r limiter.Receipt) (limiter.Decision, error) {
	sc := s.scripts[p.Algorithm]
	if sc == nil {
		return limiter.Decision{}, &limiter.PolicyError{Policy: p.Name, Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %q", p.Algorithm)}
	}
	var now any = ""
	if s.clock != nil {
		now = s.clock().UnixMicro()
	}
	nkeys := 1
	if p.Algorithm == limiter.SlidingLog {
		nkeys = 2
	}
	args := sc.args(nkeys, nkeys+8)
	t := tag(p, key)
	for _, suffix := range suffixes[p.Algorithm] {
		args = append(args, s.redisKey(&t, suffix))
	}
	args = append(args, now)
	args = append(args, s.policyConsts(p)...)
	switch {
	case op != "take" && p.Algorithm == limiter.Concurrency:
		if _, err := strconv.ParseInt(r.Entry, 10, 64); err != nil {
			return limiter.Decision{}, fmt.Errorf("redisstore: %s: %q names no hold", p.Name, r.Entry)
		}
		code := 1
		if op == "renew" {
			code = 2
		}
		args = append(args, r.Cost, code, r.Entry)
	case op == "undo":
		var ref any = r.Entry
		if p.Algorithm == limiter.SlidingWindow || p.Algorithm == limiter.FixedWindow {
			ref = r.Window
		}
		args = append(args, r.Cost, 1, ref)
	default:
		args = append(args, cost, 0, "")
	}
	if p.Algorithm == limiter.FixedWindow {
		args = append(args, p.WindowOffset(key))
	}
	n, err := s.nodeFor(ctx, args[3].(string))
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", sc.name, err)
	}
	reply, err := n.do(ctx, sc, args)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: %w", sc.name, err)
	}
	if len(reply) != replyLen {
		return limiter.Decision{}, fmt.Errorf("redisstore: %s: unexpected reply %v", sc.name, reply)
	}
	return decode(p, reply), nil
}

// policyConsts returns p's period, limit and capacity boxed for the
// arguments of a script, made once per policy.
func (s *Store) policyConsts(p *limiter.Policy) []any {
	if v, ok := s.consts.Load(p); ok {
		return v.([]any)
	}
	per := p.PeriodMicros()
	if p.Algorithm == limiter.Concurrency {
		per = p.EffectiveLease().Microseconds() // in the period's place
	}
	c := []any{per, p.Limit, p.Capacity()}
	v, _ := s.consts.LoadOrStore(p, c)
	return v.([]any)
}

// args starts the arguments of an EVALSHA of the script with nkeys keys,
// room for more.
func (sc *script) args(nkeys, more int) []any {
	a := make([]any, 0, 3+more)
	return append(a, "evalsha", sc.shaArg, nkeys)
}

// eval turns EVALSHA arguments into EVAL's.
func (sc *script) eval(args []any) []any {
	e := append([]any(nil), args...)
	e[0], e[1] = "eval", sc.srcArg
	return e
}

// replyLen is the length of one policy's reply.
const replyLen = 8

// decode reads one policy's reply: allowed, remaining, retry, reset, delay
// (µs), exceeds, receipt cost, receipt ref (window start, or sliding_log
// sequence number).
func decode(p *limiter.Policy, v []int64) limiter.Decision {
	d := limiter.Decision{
		Allowed:         v[0] == 1,
		Limit:           p.Capacity(),
		Remaining:       v[1],
		RetryAfter:      time.Duration(v[2]) * time.Microsecond,
		ResetAfter:      time.Duration(v[3]) * time.Microsecond,
		Delay:           time.Duration(v[4]) * time.Microsecond,
		ExceedsCapacity: v[5] == 1,
	}
	if v[6] > 0 {
		d.Receipt.Cost = v[6]
		switch p.Algorithm {
		case limiter.SlidingLog:
			d.Receipt.Entry = strconv.FormatInt(v[7], 10) + ":" + strconv.FormatInt(v[6], 10)
		case limiter.Concurrency:
			d.Receipt.Entry = strconv.FormatInt(v[7], 10) // the hold's id
		case limiter.SlidingWindow, limiter.FixedWindow:
			d.Receipt.Window = v[7]
		}
	}
	return d
}
