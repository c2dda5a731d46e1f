package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node is one Redis server the store sends scripts to: the server of a
// standalone or Sentinel client, or one master of a Cluster. Each has its
// own queue, workers, breaker and health, so a failing node affects only
// the keys it owns.
//
// While Redis answers fast and nothing is queued, a check makes its round
// trip itself, on its own goroutine, as a plain go-redis call bounded by its
// deadline: handing it to a worker and back would cost two goroutine
// wake-ups, more than the round trip itself on a fast local Redis. A reply
// already in the socket when that deadline passes is still read (the
// store's own dialer wraps each connection, see lateReadConn).
//
// Otherwise (Redis slower than a fraction of the budget, or checks queued)
// a check does not wait on the socket itself: it queues a call and waits for
// its result or its deadline, whichever comes first. Workers take whatever
// calls are queued, at once and without waiting for more, and send them in
// one pipeline: under load many checks share one round trip. A worker waits
// for the replies up to ReplyWait, well past the store timeout, so a reply
// that comes late is still read and the connection stays in the pool: a slow
// Redis costs checks, never connections. Only a stall that begins while
// checks are on the direct path costs those few their connections (at most
// maxDirect), and sends every check to the workers for a while.
type node struct {
	addr  string
	store *Store
	// src sends to this node: the node's own client in a Cluster, the
	// store's client otherwise. Replaced when the Cluster hands out a new one.
	src   atomic.Pointer[pipeSource]
	queue chan *call
	// workers run, idle of them wait for a call. Up to basePipelines run
	// always; more start, up to the store's pipelines, when a call has
	// waited spawnAfter for one (the pipelines out are slow), and end after
	// idling a while. On a fast Redis a few pipelines then carry big
	// batches; on a slow one no check waits for another's round trip.
	workers, idle atomic.Int32
	br            breaker
	oom           atomic.Bool // the last reply was an OOM error
	// lastErr is the last store error seen on this node, for Health.
	lastErr atomic.Pointer[string]
	// failedAt is the time (UnixNano) of the last failure, 0 once healthy.
	failedAt atomic.Int64
	warming  atomic.Bool
	// direct counts the checks making their round trip themselves;
	// slowUntil (UnixNano) sends every check to the workers until then.
	direct    atomic.Int32
	slowUntil atomic.Int64
}

type pipeSource struct{ c pipeliner }

// pipeliner is what a worker needs of a go-redis client.
type pipeliner interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

// call is one script run waiting for its worker.
type call struct {
	sc    *script
	args  []any // EVALSHA's: sha, number of keys, keys, arguments
	state atomic.Int32
	done  chan struct{}
	reply []int64
	err   error
	node  *node
}

// Call states: a queued call not yet sent can be withdrawn; one sent has
// perhaps run.
const (
	queued int32 = iota
	sent
	finished
	abandoned
)

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// timerPool holds the timers that bound checks: none is made per check.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func newNode(s *Store, addr string, src pipeliner) *node {
	n := &node{addr: addr, store: s, queue: make(chan *call, 4096)}
	n.src.Store(&pipeSource{src})
	n.br.init(s.breakerThreshold, s.probeInterval)
	n.spawn()
	return n
}

// warm readies the node's pool: go-redis dials idle connections ahead
// (MinIdleConns) but says HELLO only on a connection's first use, which
// would then be some check's. Holding as many connections at once as the
// pool has, warm makes each say HELLO and load the scripts, outside any
// check. It runs when the node appears and again after it failed.
func (n *node) warm(bound time.Duration) {
	if !n.warming.CompareAndSwap(false, true) {
		return
	}
	defer n.warming.Store(false)
	c, ok := n.src.Load().c.(*redis.Client)
	if !ok {
		return // a Ring: its shards warm on first use
	}
	size := min(c.Options().PoolSize, 64)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	load := func(p redis.Pipeliner) {
		for _, sc := range n.store.scripts {
			p.ScriptLoad(ctx, sc.src)
		}
		p.ScriptLoad(ctx, n.store.multi.src)
		_, _ = p.Exec(ctx)
	}
	var wg sync.WaitGroup
	if !n.store.ownDialer {
		// go-redis races on its options when Conns of one client say HELLO
		// with maintenance notifications in auto mode (NewClient turns them
		// off): warm through the client itself, as many pipelines at once as
		// the pool has (most then hold a connection of their own).
		start := make(chan struct{})
		for range size {
			wg.Go(func() { <-start; load(c.Pipeline()) })
		}
		close(start)
		wg.Wait()
		return
	}
	conns := make([]*redis.Conn, size)
	for i := range conns {
		conns[i] = c.Conn() // each holds a connection of its own until Close
		wg.Go(func() { load(conns[i].Pipeline()) })
	}
	wg.Wait()
	for _, cn := range conns {
		cn.Close()
	}
}

const (
	basePipelines = 4
	// A queued call waits a tenth of its budget, within these bounds, for a
	// pipeline to come back before another starts.
	minSpawnAfter, maxSpawnAfter = time.Millisecond, 5 * time.Millisecond
	// extraIdle is how long a worker beyond basePipelines idles before it ends.
	extraIdle = time.Second
)

// spawn starts a worker unless the node has as many as it may, and
// reports whether it did.
func (n *node) spawn() bool {
	var w int32
	for {
		w = n.workers.Load()
		if int(w) >= n.store.pipelines {
			return false
		}
		if n.workers.CompareAndSwap(w, w+1) {
			break
		}
	}
	n.store.wg.Add(1)
	go n.work(int(w) >= basePipelines)
	return true
}

// ErrBreakerOpen is the store error of a check that skipped a node whose
// breaker is open: it failed repeatedly, and only a probe now and then goes
// through until it answers again.
var ErrBreakerOpen = errors.New("redisstore: node circuit breaker open")

// do runs sc on this node and waits for its reply or for ctx.
func (n *node) do(ctx context.Context, sc *script, args []any) ([]int64, error) {
	if !n.br.allow() {
		return nil, fmt.Errorf("node %s: %w", n.addr, ErrBreakerOpen)
	}
	budget := time.Duration(n.store.callTimeout.Load())
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); budget == 0 || left < budget {
			budget = left
		}
	}
	if budget == 0 {
		budget = n.store.replyWait
	}
	if n.enterDirect() {
		return n.doDirect(sc, args, budget)
	}
	c := callPool.Get().(*call)
	c.sc, c.args, c.node = sc, args, n
	c.state.Store(queued)
	t := timerPool.Get().(*time.Timer)
	t.Reset(budget)
	defer func() { t.Stop(); timerPool.Put(t) }()
	waiting := false
	select {
	case n.queue <- c:
		if n.idle.Load() == 0 && !(int(n.workers.Load()) < basePipelines && n.spawn()) {
			waiting = true // every pipeline is on its way
		}
	case <-t.C:
		n.failed(context.DeadlineExceeded, true)
		return nil, fmt.Errorf("node %s: %w", n.addr, context.DeadlineExceeded)
	case <-ctx.Done():
		n.failed(ctx.Err(), true)
		return nil, fmt.Errorf("node %s: %w", n.addr, ctx.Err())
	case <-n.store.stop:
		return nil, errClosed
	}
	// While every pipeline is on its way, the budget's timer first fires
	// after a tenth of it (1-5ms): if this call is still queued then, one
	// more pipeline starts rather than wait for a round trip to end (on a
	// slow Redis that wait would fail checks); then it runs out the budget.
	nudge := waiting
	if nudge {
		first := min(max(budget/10, minSpawnAfter), maxSpawnAfter)
		t.Reset(first)
	}
	var err error
wait:
	for {
		select {
		case <-c.done:
			break wait
		case <-t.C:
			if nudge {
				nudge = false
				if c.state.Load() == queued {
					n.spawn()
				}
				t.Reset(budget - min(max(budget/10, minSpawnAfter), maxSpawnAfter))
				continue
			}
			err = context.DeadlineExceeded
			break wait
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		}
	}
	if err != nil {
		if n.abandon(c, budget) {
			n.failed(err, true)
			return nil, fmt.Errorf("node %s: %w", n.addr, err)
		}
		// it finished after all
	}
	reply, err := c.reply, c.err
	c.reply, c.err, c.args, c.sc, c.node = nil, nil, nil, nil, nil
	callPool.Put(c)
	return reply, err
}

const (
	// maxDirect bounds the checks of a node on the direct path at once: the
	// connections a sudden stall can cost.
	maxDirect = 2
	// A direct round trip that failed, or took more than budget/directShare,
	// sends the node's checks to the workers for slowFor. Half the budget
	// marks a stall; a few milliseconds, which a busy gateway's scheduler
	// alone adds now and then, do not.
	directShare = 2
	slowFor     = time.Second
)

// enterDirect reports whether a check may make its round trip itself, and
// counts it: no worker has a pipeline out or calls queued (under load the
// check rather joins the next pipeline), Redis has been fast, and the
// store's own dialer made the connections (so a late read is told from a
// late reply).
func (n *node) enterDirect() bool {
	if !n.store.ownDialer || len(n.queue) > 0 || n.idle.Load() < n.workers.Load() ||
		time.Now().UnixNano() < n.slowUntil.Load() {
		return false
	}
	for {
		d := n.direct.Load()
		if d >= maxDirect {
			return false
		}
		if n.direct.CompareAndSwap(d, d+1) {
			return true
		}
	}
}

// doDirect is one check's round trip on the caller's goroutine, its socket
// deadline the check's own.
func (n *node) doDirect(sc *script, args []any, budget time.Duration) ([]int64, error) {
	defer n.direct.Add(-1)
	start := time.Now()
	ctx := &deadlineCtx{Context: context.Background(), at: start.Add(budget)}
	reply, err := n.runOne(ctx, sc, args)
	if err != nil || time.Since(start) > budget/directShare {
		n.slowUntil.Store(time.Now().Add(slowFor).UnixNano())
	}
	if err != nil && !isServerError(err) {
		return nil, fmt.Errorf("node %s: %w", n.addr, err)
	}
	return reply, err
}

// deadlineCtx bounds a go-redis call by a deadline without arming a timer:
// go-redis reads only Deadline, to set the socket's.
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

// runOne sends one script run to this node and reads its reply: EVALSHA,
// EVAL when the server does not know the script, the Cluster client when
// the slot moved. It records the node's health.
func (n *node) runOne(ctx context.Context, sc *script, args []any) ([]int64, error) {
	src := n.src.Load().c
	cmd := redis.NewIntSliceCmd(ctx, args...)
	n.store.countRoundTrip(RoundTripExact)
	_ = src.Process(ctx, noRetryCmd{cmd})
	if isNoScript(cmd.Err()) {
		// EVALSHA did not run, so sending the script itself is no retry.
		cmd = redis.NewIntSliceCmd(ctx, sc.eval(args)...)
		n.store.countRoundTrip(RoundTripExact)
		_ = src.Process(ctx, noRetryCmd{cmd})
	}
	reply, err := cmd.Val(), cmd.Err()
	if err != nil && n.store.cluster != nil && isRedirect(err) {
		n.store.cluster.ReloadState(ctx)
		reply, err = n.store.runCluster(ctx, sc, args)
	}
	n.record(err)
	return reply, err
}

// record keeps the node's health after a round trip with these errors
// (nil for a reply): it answers when one got a reply or a server error.
func (n *node) record(errs ...error) {
	for _, err := range errs {
		if err == nil || isServerError(err) {
			n.succeeded(errs)
			return
		}
	}
	n.failed(errs[0], false)
}

// abandon gives up on c after its caller's deadline. A reply already
// waiting in a socket of this node is not a timeout: the gateway, short of
// CPU, has not read it yet, so the check waits a little longer for it (at
// most the length of the caller's own budget once more). It reports whether
// c was given up; false means it finished.
func (n *node) abandon(c *call, budget time.Duration) bool {
	if c.state.CompareAndSwap(queued, abandoned) {
		return true // never sent: nothing charged
	}
	if budget > 0 && n.store.conns.replyWaiting(n.addr) {
		t := time.NewTimer(budget)
		select {
		case <-c.done:
			t.Stop()
			return false
		case <-t.C:
		}
	}
	if c.state.CompareAndSwap(sent, abandoned) {
		return true
	}
	<-c.done // finished meanwhile
	return false
}

// work is one worker: take what is queued, send it as one pipeline,
// deliver. An extra worker ends after idling extraIdle.
func (n *node) work(extra bool) {
	defer n.store.wg.Done()
	var idleC <-chan time.Time
	var idleT *time.Timer
	if extra {
		idleT = time.NewTimer(extraIdle)
		defer idleT.Stop()
		idleC = idleT.C
	}
	batch := make([]*call, 0, n.store.maxBatch)
	for {
		batch = batch[:0]
		n.idle.Add(1)
		if extra {
			idleT.Reset(extraIdle)
		}
		select {
		case c := <-n.queue:
			n.idle.Add(-1)
			batch = append(batch, c)
		case <-idleC:
			n.idle.Add(-1)
			n.workers.Add(-1)
			return
		case <-n.store.stop:
			return
		}
	drain:
		for len(batch) < cap(batch) {
			select {
			case c := <-n.queue:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		live := batch[:0]
		for _, c := range batch {
			if c.state.CompareAndSwap(queued, sent) {
				live = append(live, c)
			} // else abandoned by a caller whose deadline passed: dropped unsent
		}
		if len(live) > 0 {
			n.exec(live)
		}
	}
}

// exec sends the calls as one pipeline (a lone one as one command), falls
// back to EVAL for those the server did not know by SHA, and delivers.
func (n *node) exec(calls []*call) {
	ctx := context.Background() // the client's read timeout bounds the wait
	if n.store.needDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.store.replyWait)
		defer cancel()
	}
	cmds := make([]*redis.IntSliceCmd, len(calls))
	for i, c := range calls {
		cmds[i] = redis.NewIntSliceCmd(ctx, c.args...)
	}
	n.sendScripts(ctx, cmds, RoundTripExact, func(i int) []any { return calls[i].sc.eval(calls[i].args) })
	replies := make([][]int64, len(calls))
	errs := make([]error, len(calls))
	for i, c := range calls {
		reply, err := cmds[i].Val(), cmds[i].Err()
		if err != nil && n.store.cluster != nil && isRedirect(err) {
			// The slot moved (resharding, failover): the script did not run
			// here, so sending it where the cluster says is no retry.
			n.store.cluster.ReloadState(ctx)
			reply, err = n.store.runCluster(ctx, c.sc, c.args)
		}
		replies[i], errs[i] = reply, err
	}
	// The node's health first, so that whoever reads it after a check
	// returned sees what that check saw.
	n.record(errs...)
	for i, c := range calls {
		c.reply, c.err = replies[i], errs[i]
		if !c.state.CompareAndSwap(sent, finished) {
			continue // its caller gave up; the reply is read, the connection kept
		}
		c.done <- struct{}{}
	}
}

// sendScripts runs the script commands cmds on n in one round trip, then
// those the server did not know by SHA again as EVAL (evalArgs(i) gives
// command i's): EVALSHA did not run, so that is no retry. It reports the
// round trips made, each also counted for the store's OnRoundTrip.
func (n *node) sendScripts(ctx context.Context, cmds []*redis.IntSliceCmd, kind RoundTrip, evalArgs func(i int) []any) int {
	src := n.src.Load().c
	n.store.countRoundTrip(kind)
	send(ctx, src, cmds)
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return 1
	}
	retry := make([]*redis.IntSliceCmd, len(again))
	for j, i := range again {
		retry[j] = redis.NewIntSliceCmd(ctx, evalArgs(i)...)
	}
	n.store.countRoundTrip(kind)
	send(ctx, src, retry)
	for j, i := range again {
		cmds[i] = retry[j]
	}
	return 2
}

// send runs cmds on src, one alone as a plain command.
func send(ctx context.Context, src pipeliner, cmds []*redis.IntSliceCmd) {
	if len(cmds) == 1 {
		_ = src.Process(ctx, noRetryCmd{cmds[0]})
		return
	}
	pipe := src.Pipeline()
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, noRetryCmd{cmd})
	}
	_, _ = pipe.Exec(ctx)
}

func (n *node) succeeded(errs []error) {
	n.br.success()
	if n.failedAt.Load() != 0 {
		n.failedAt.Store(0)
		go n.warm(n.store.replyWait) // connections were lost: ready new ones
		n.store.readSoon()           // perhaps another Redis: its eviction policy
	}
	oom := false
	for _, err := range errs {
		oom = oom || isOOM(err)
	}
	n.oom.Store(oom)
}

// failed records a failure of the node: a transport error, or a caller's
// deadline passing (callerSide). The Cluster's slot map is refreshed at
// once: the first error from a node may be its failover.
func (n *node) failed(err error, callerSide bool) {
	if err == nil || errors.Is(err, context.Canceled) && callerSide {
		return
	}
	n.br.failure()
	n.failedAt.Store(time.Now().UnixNano())
	msg := err.Error()
	n.lastErr.Store(&msg)
	if cc := n.store.cluster; cc != nil {
		cc.ReloadState(context.Background())
	}
}

// noRetryCmd is a command go-redis must not resend after a lost reply: the
// script may have run, and running it again would charge twice. go-redis
// honours it for single commands and for whole pipelines.
type noRetryCmd struct{ *redis.IntSliceCmd }

func (noRetryCmd) NoRetry() bool { return true }

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

func isOOM(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "OOM")
}

func isRedirect(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// isServerError reports an error the server replied with (it is up).
func isServerError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	// These say the node cannot serve now: count them as failures.
	for _, p := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "BUSY"} {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// breaker is a node's circuit breaker. It opens after threshold consecutive
// failures; while open, one probe goes through every probeInterval, and the
// first success closes it. The probe interval, not a long cool-down, bounds
// how long checks skip a node that answers again: fail-open outlasts a stall
// by at most about one probe interval.
type breaker struct {
	threshold int32
	interval  int64 // ns
	failures  atomic.Int32
	open      atomic.Bool
	nextProbe atomic.Int64 // UnixNano
}

func (b *breaker) init(threshold int, interval time.Duration) {
	b.threshold, b.interval = int32(threshold), int64(interval)
}

func (b *breaker) allow() bool {
	if !b.open.Load() {
		return true
	}
	now := time.Now().UnixNano()
	next := b.nextProbe.Load()
	return now >= next && b.nextProbe.CompareAndSwap(next, now+b.interval)
}

func (b *breaker) success() {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.open.Load() {
		b.open.Store(false)
	}
}

func (b *breaker) failure() {
	if b.failures.Add(1) >= b.threshold && !b.open.Load() {
		b.nextProbe.Store(time.Now().UnixNano() + b.interval)
		b.open.Store(true)
	}
}

func (b *breaker) isOpen() bool { return b.open.Load() }
