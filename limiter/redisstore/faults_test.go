package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// The fault tests of docs/redis.md ("Timeouts, failures and failovers"): each one starts its own Redis processes, puts
// load on them from several goroutines and limiters, breaks something, and
// measures what the checks saw. Each prints (t.Logf) requests, admissions,
// errors, check latency during the fault and the time to recover.

const storeTimeout = 50 * time.Millisecond

// sample is one check as the load saw it.
type sample struct {
	at      time.Duration // since the load started
	took    time.Duration
	key     string
	allowed bool
	err     error
}

// load runs checks from workers goroutines, round robin over limiters and
// keys, every pause, until stop is closed or for at most limit.
type load struct {
	limiters []*limiter.Limiter
	policy   *limiter.Policy
	keys     []string
	workers  int
	pause    time.Duration

	onStart func() // called once start is set
	// others, when set, is a second jitter probe: how long the other
	// processes the checks go through (Redis, the latency proxy) waited for
	// a CPU since it was last called. A busy machine stalls them too, unseen
	// by the in-process probe.
	others func() time.Duration

	start   time.Time
	mu      sync.Mutex
	samples []sample
	stalls  []stall // what the jitter probes measured during the run
}

// stall is one answer of a jitter probe: at is when it came, late how much
// later than expected. A machine busy with other work shows here.
type stall struct{ at, late time.Duration }

func (l *load) run(stop <-chan struct{}, limit time.Duration) {
	l.start = time.Now()
	if l.onStart != nil {
		l.onStart()
	}
	deadline := l.start.Add(limit)
	// The probes run until the last check has answered, past the deadline.
	checked := make(chan struct{})
	var probes, wg sync.WaitGroup
	probes.Go(func() { l.probe(checked, sleepProbe) })
	if l.others != nil {
		probes.Go(func() { l.probe(checked, l.others) })
	}
	for w := range l.workers {
		wg.Go(func() {
			var mine []sample
			for i := w; time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					i = -1
				default:
				}
				if i < 0 {
					break
				}
				lim := l.limiters[i%len(l.limiters)]
				key := l.keys[i%len(l.keys)]
				t0 := time.Now()
				d := lim.Allow(context.Background(), l.policy, key, 1)
				mine = append(mine, sample{at: t0.Sub(l.start), took: time.Since(t0), key: key, allowed: d.Allowed && d.Err == nil, err: d.Err})
				if l.pause > 0 {
					time.Sleep(l.pause)
				}
			}
			l.mu.Lock()
			l.samples = append(l.samples, mine...)
			l.mu.Unlock()
		})
	}
	wg.Wait()
	close(checked)
	probes.Wait()
	slices.SortFunc(l.samples, func(a, b sample) int { return int(a.at - b.at) })
}

// probe measures the jitter of the machine until done is closed: it calls
// measure (each answer how late it came) a millisecond apart.
func (l *load) probe(done <-chan struct{}, measure func() time.Duration) {
	var stalls []stall
	for {
		select {
		case <-done:
			l.mu.Lock()
			l.stalls = append(l.stalls, stalls...)
			l.mu.Unlock()
			return
		default:
		}
		late := measure()
		stalls = append(stalls, stall{at: time.Since(l.start), late: late})
		time.Sleep(time.Millisecond)
	}
}

// sleepProbe asks to sleep a millisecond and says how late it woke: how
// long the machine kept a runnable goroutine of this process waiting.
func sleepProbe() time.Duration {
	t0 := time.Now()
	time.Sleep(time.Millisecond)
	return time.Since(t0) - time.Millisecond
}

// schedProbe is a probe for load.others: the longest any thread of the
// processes pids returns waited for a CPU while runnable, since the last
// call (Linux's /proc/PID/task/TID/schedstat; nothing elsewhere). It counts
// only the machine keeping a process waiting, not the work the checks give
// it: a store that floods Redis shows in no probe.
func schedProbe(pids ...func() int) func() time.Duration {
	last := map[string]time.Duration{}
	return func() time.Duration {
		var worst time.Duration
		for _, pid := range pids {
			dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid()))
			for _, f := range dirs {
				b, err := os.ReadFile(f)
				fields := strings.Fields(string(b))
				if err != nil || len(fields) < 2 {
					continue
				}
				ns, _ := strconv.ParseInt(fields[1], 10, 64) // run_delay
				waited := time.Duration(ns)
				if before, ok := last[f]; ok {
					worst = max(worst, waited-before)
				}
				last[f] = waited
			}
		}
		return worst
	}
}

// measureStalls runs f beside the in-process jitter probe and returns the
// worst stall the probe saw meanwhile.
func measureStalls(f func()) time.Duration {
	l := &load{start: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.probe(stop, sleepProbe)
	}()
	f()
	close(stop)
	<-done
	return l.worstStall(0, time.Since(l.start))
}

// worstStall is the latest a probe answered in [from, to]: how long the
// machine kept this process or Redis waiting then.
func (l *load) worstStall(from, to time.Duration) time.Duration {
	var worst time.Duration
	for _, s := range l.stalls {
		if s.at >= from && s.at-s.late <= to {
			worst = max(worst, s.late)
		}
	}
	return worst
}

// stallFor is the worst stall a check s may have suffered: during it, and
// during the timeout before it, whose checks' replies may still be due on
// the connections s queues behind.
func (l *load) stallFor(s sample, timeout time.Duration) time.Duration {
	return l.worstStall(s.at-timeout, s.at+s.took)
}

// verdict is what one run of a fault test found, kept until the run is
// known to be judged: checks counts the run's checks, excused those whose
// failure a stall of the machine explains.
type verdict struct {
	errs            []string
	checks, excused int
}

func (v *verdict) Errorf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

func (v *verdict) tooStalled() bool { return v.excused > v.checks/10 }

// judge runs a fault test up to three times. A run in which more than a
// tenth of the checks failed during stalls of the machine cannot tell the
// store's failures from the machine's, and is run again; the third is
// judged whatever it saw. A failure no stall explains fails the test in
// any run that is judged.
func judge(t *testing.T, run func(v *verdict)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		v := &verdict{}
		run(v)
		if v.tooStalled() && attempt < 3 {
			t.Logf("run %d: %d of %d checks failed during stalls of the machine, too many to judge: running again", attempt, v.excused, v.checks)
			continue
		}
		if v.tooStalled() {
			t.Errorf("%d of %d checks failed during stalls of the machine, in each of %d runs: too many to tell the store's failures from the machine's", v.excused, v.checks, attempt)
		}
		for _, e := range v.errs {
			t.Error(e)
		}
		return
	}
}

// stats summarises samples: count, admitted, errors, latency percentiles.
func stats(samples []sample) string {
	if len(samples) == 0 {
		return "no checks"
	}
	var admitted, errs int
	lat := make([]time.Duration, len(samples))
	for i, s := range samples {
		lat[i] = s.took
		if s.err != nil {
			errs++
		} else if s.allowed {
			admitted++
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("%d checks, %d admitted, %d errors, latency p50 %s p99 %s max %s", len(samples), admitted, errs, pct(0.5), pct(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
}

func newLimiterOver(t *testing.T, store limiter.Store) *limiter.Limiter {
	t.Helper()
	return newLimiterWith(t, store, storeTimeout)
}

func newLimiterWith(t *testing.T, store limiter.Store, timeout time.Duration) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(store, limiter.WithTimeout(timeout), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func open(t *testing.T, co redisstore.ClientOptions, prefix string) *redisstore.Store {
	t.Helper()
	if co.Timeout == 0 {
		co.Timeout = storeTimeout
	}
	s, err := redisstore.Open(co, &redisstore.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

const proxyEnv = "COSTGATE_REDISSTORE_PROXY"

// runProxy is the latency proxy's process: a proxy in the test's own
// process would be slowed by the checks it measures (and more so under the
// race detector), adding latency the test did not ask for. It prints its
// address, then takes "latency DURATION" lines on stdin, answering "ok".
func runProxy(target string) int {
	p, err := redistest.NewProxy(target)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer p.Close()
	fmt.Println(p.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "latency "); ok {
			latency, err := time.ParseDuration(d)
			if err != nil {
				fmt.Println(err)
				return 1
			}
			p.SetLatency(latency)
			fmt.Println("ok")
		}
	}
	return 0
}

// proxyProcess is a latency proxy in a child process.
type proxyProcess struct {
	addr string
	pid  int
	in   io.WriteCloser
	out  *bufio.Scanner
}

func startProxyProcess(t *testing.T, target string) *proxyProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), proxyEnv+"="+target)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	p := &proxyProcess{pid: cmd.Process.Pid, in: in, out: bufio.NewScanner(out)}
	if !p.out.Scan() {
		t.Fatal("the proxy process printed no address")
	}
	p.addr = p.out.Text()
	return p
}

func (p *proxyProcess) setLatency(t *testing.T, d time.Duration) {
	t.Helper()
	fmt.Fprintf(p.in, "latency %s\n", d)
	if !p.out.Scan() || p.out.Text() != "ok" {
		t.Fatalf("the proxy process did not take latency %s: %q", d, p.out.Text())
	}
}

// connectionsReceived is Redis's count of connections accepted so far.
func connectionsReceived(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	c := srv.Client()
	defer c.Close()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("INFO stats has no total_connections_received")
	return 0
}

// A Redis slower than usual but under the timeout never fails a check: with
// 10, 20 and 40ms added to every reply under a 50ms timeout (100ms under the
// race detector, which slows the client several times over and leaves the
// 40ms case no margin on two shared cores), no check fails,
// admissions stay exact, and the client opens no more connections than its
// pool holds (counted at the proxy).
func TestSlowRedisFailsNoCheck(t *testing.T) {
	srv := redistest.StartServer(t)
	const poolSize = 20
	timeout := storeTimeout
	if raceEnabled {
		timeout = 2 * storeTimeout
	}
	for _, latency := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			judge(t, func(v *verdict) {
				proxy := startProxyProcess(t, srv.Addr())
				prefix := newPrefix(t)
				before := connectionsReceived(t, srv)
				var limiters []*limiter.Limiter
				for range 3 { // three gateways, each with its own client and pool
					s := open(t, redisstore.ClientOptions{URL: "redis://" + proxy.addr, PoolSize: poolSize, Timeout: timeout}, prefix)
					limiters = append(limiters, newLimiterWith(t, s, timeout))
				}
				warm := connectionsReceived(t, srv) - before - 1
				proxy.setLatency(t, latency)
				p := mustValidate(t, &limiter.Policy{Name: "slow", Algorithm: limiter.SlidingLog, Limit: 100, Period: time.Hour})
				l := &load{limiters: limiters, policy: p, keys: []string{"k"}, workers: 6, pause: 10 * time.Millisecond,
					others: schedProbe(srv.Pid, func() int { return proxy.pid })}
				l.run(nil, 1500*time.Millisecond)
				opened := connectionsReceived(t, srv) - before - 2
				t.Logf("+%s: %s; connections %d before the latency, %d after", latency, stats(l.samples), warm, opened)
				// A check may fail only where the machine itself stalled long
				// enough to explain it: a probe saw this process, the proxy or
				// Redis kept waiting half the headroom (timeout − latency) or more
				// during the check. A failure without such a stall is the store's;
				// a run with many failures in stalls is run again (judge).
				var admitted, errs int
				v.checks = len(l.samples)
				for _, s := range l.samples {
					switch {
					case s.err != nil && l.stallFor(s, timeout) >= (timeout-latency)/2:
						v.excused++
						t.Logf("check at %s failed after %s while the machine stalled %s: %v", s.at, s.took, l.stallFor(s, timeout), s.err)
					case s.err != nil:
						errs++
						if errs <= 3 {
							v.Errorf("check at %s failed after %s, the machine stalling at most %s then: %v", s.at, s.took, l.stallFor(s, timeout), s.err)
						}
					case s.allowed:
						admitted++
					}
				}
				if errs > 0 {
					v.Errorf("%d of %d checks failed with Redis %s slower, under a %s timeout", errs, len(l.samples), latency, timeout)
				}
				// A check that timed out may have charged.
				if want := min(100, len(l.samples)); admitted > want || admitted < want-v.excused {
					v.Errorf("admitted %d of %d, want exactly %d (less the %d checks that failed in stalls)", admitted, len(l.samples), want, v.excused)
				}
				if opened > 3*poolSize {
					v.Errorf("%d connections for 3 clients with pools of %d", opened, poolSize)
				}
			})
		})
	}
}

// DEBUG SLEEP stalls Redis for 0.5s: checks fail open during the stall and
// for no more than 100ms after it. The stall ends, at the latest, when
// DEBUG SLEEP's own answer arrives; a check that starts later than 100ms
// after that and fails is the store's fault, unless a jitter probe saw this
// process or Redis kept waiting half the store timeout during the check
// (a run with many such checks is run again: see judge).
func TestStallFailsOpenNoLongerThanTheStall(t *testing.T) {
	judge(t, func(v *verdict) {
		srv := redistest.StartServer(t, redistest.WithConfig("enable-debug-command", "yes"))
		prefix := newPrefix(t)
		var limiters []*limiter.Limiter
		for range 3 {
			limiters = append(limiters, newLimiterOver(t, open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, prefix)))
		}
		p := mustValidate(t, &limiter.Policy{Name: "stall", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second})
		l := &load{limiters: limiters, policy: p, keys: []string{"a", "b", "c"}, workers: 6, pause: 2 * time.Millisecond,
			others: schedProbe(srv.Pid)}
		const stall, after = 500 * time.Millisecond, 100 * time.Millisecond
		var sleptAt, wokeAt time.Duration
		slept := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			<-started
			time.Sleep(300 * time.Millisecond)
			c := srv.Client()
			defer c.Close()
			sleptAt = time.Since(l.start)
			err := c.Do(context.Background(), "DEBUG", "SLEEP", strconv.FormatFloat(stall.Seconds(), 'f', 3, 64)).Err()
			wokeAt = time.Since(l.start)
			slept <- err
		}()
		l.onStart = func() { close(started) }
		l.run(nil, 1500*time.Millisecond)
		if err := <-slept; err != nil {
			t.Fatalf("DEBUG SLEEP: %v", err)
		}
		var first, last time.Duration = -1, -1
		var during, late []sample
		v.checks = len(l.samples)
		for _, s := range l.samples {
			if s.err != nil {
				if first < 0 {
					first = s.at
				}
				last = s.at + s.took
				// A failed check took its timeout, twice at most when a reply
				// was waiting in a socket (and what the machine stalled).
				if worst := l.worstStall(s.at, s.at+s.took); s.took > 2*storeTimeout+after+worst {
					v.Errorf("a check failed after %s, the machine stalling at most %s then: want about the %s timeout", s.took.Round(time.Millisecond), worst, storeTimeout)
				}
				if s.at > wokeAt+after {
					if worst := l.stallFor(s, storeTimeout); worst >= storeTimeout/2 {
						v.excused++
						t.Logf("check at +%s failed after %s while the machine stalled %s: %v", s.at-wokeAt, s.took, worst, s.err)
					} else {
						late = append(late, s)
					}
				}
			}
			if s.at >= sleptAt && s.at < wokeAt+after {
				during = append(during, s)
			}
		}
		if first < 0 {
			t.Fatalf("no check failed during a %s stall: %s", stall, stats(l.samples))
		}
		t.Logf("stall %s (DEBUG SLEEP answered after %s): checks failed from +%s to +%s after it began; during: %s",
			stall, (wokeAt - sleptAt).Round(time.Millisecond), (first - sleptAt).Round(time.Millisecond), (last - sleptAt).Round(time.Millisecond), stats(during))
		for i, s := range late {
			if i < 3 {
				v.Errorf("a check started %s after the stall ended failed after %s, the machine stalling at most %s then: %v",
					(s.at - wokeAt).Round(time.Millisecond), s.took.Round(time.Millisecond), l.stallFor(s, storeTimeout), s.err)
			}
		}
		if len(late) > 0 {
			v.Errorf("%d checks failed that started more than %s after a %s stall ended", len(late), after, stall)
		}
	})
}

// Redis at maxmemory with noeviction answers PING but refuses every write:
// health says out of memory, and checks follow on_store_error.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.StartServer(t, redistest.WithConfig("maxmemory-policy", "noeviction"))
	store := open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, newPrefix(t))
	lim := newLimiterOver(t, store)
	allow := mustValidate(t, &limiter.Policy{Name: "allow", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute, OnStoreError: limiter.FailAllow})
	deny := mustValidate(t, &limiter.Policy{Name: "deny", Algorithm: limiter.SlidingLog, Limit: 100, Period: time.Minute, OnStoreError: limiter.FailDeny})
	ctx := context.Background()
	if h := store.Health(ctx); h.State != redisstore.StateUp {
		t.Fatalf("health before: %+v, want up", h)
	}
	if err := srv.Client().ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	d := lim.Allow(ctx, allow, "k", 1)
	if !d.Allowed || d.Outcome != limiter.ErrorAllowed || d.Err == nil || !strings.Contains(d.Err.Error(), "OOM") {
		t.Errorf("allow policy: %+v, want error_allowed with the OOM error", d)
	}
	d = lim.Allow(ctx, deny, "k", 1)
	if d.Allowed || d.Outcome != limiter.ErrorDenied {
		t.Errorf("deny policy: %+v, want error_denied", d)
	}
	h := store.Health(ctx)
	if h.State != redisstore.StateOutOfMemory || len(h.Nodes) != 1 || h.Nodes[0].State != redisstore.StateOutOfMemory {
		t.Errorf("health: %+v, want out of memory", h)
	}
	t.Logf("health at maxmemory: %+v", h)
	if err := srv.Client().ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if d := lim.Allow(ctx, deny, "k", 1); !d.Allowed || d.Err != nil {
		t.Errorf("with room again: %+v", d)
	}
	if h := store.Health(ctx); h.State != redisstore.StateUp {
		t.Errorf("health with room again: %+v, want up", h)
	}
}

// local_cache: a hot key sent 5,000 requests past its limit costs Redis only
// a small fraction of them, and admissions stay exact.
func TestLocalCacheSparesRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	prefix := newPrefix(t)
	var limiters []*limiter.Limiter
	for range 3 {
		limiters = append(limiters, newLimiterOver(t, open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, prefix)))
	}
	p := mustValidate(t, &limiter.Policy{Name: "hot", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Hour, LocalCache: true})
	ctx := context.Background()
	scripts := func() int64 {
		info, err := srv.Client().Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			c, _ := strconv.ParseInt(calls, 10, 64)
			n += c
		}
		return n
	}
	before := scripts()
	const requests = 5100
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < requests; i += 6 {
				d := limiters[i%len(limiters)].Allow(ctx, p, "abuser", 1)
				if d.Err != nil {
					t.Errorf("check %d: %v", i, d.Err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	calls := scripts() - before
	t.Logf("%d requests at a limit of 100: %d admitted, %d reached Redis", requests, admitted.Load(), calls)
	if admitted.Load() != 100 {
		t.Errorf("admitted %d, want exactly 100", admitted.Load())
	}
	if calls > requests/20 {
		t.Errorf("%d of %d requests reached Redis, want at most %d", calls, requests, requests/20)
	}
}

// slowReadConn holds a reply in the socket: while armed, every Read waits
// before it reads, as a goroutine delayed by a CPU-starved gateway would.
type slowReadConn struct {
	*net.TCPConn
	delay *atomic.Int64
}

func (c slowReadConn) Read(p []byte) (int, error) {
	if d := c.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	return c.TCPConn.Read(p)
}

// A gateway short of CPU reads a reply late that arrived in time: that is
// not a store timeout. Each read waits 150ms (the reply is in the socket all
// along, Redis answered within a millisecond) under a 100ms timeout; the
// store waits at most the timeout once more for it. Before the store
// enforced the deadline itself, go-redis failed every such check with "i/o
// timeout" and threw the connection away. A check may still fail where the
// jitter probe saw the test itself kept waiting half its 50ms of headroom.
func TestReplyWaitingInTheSocketIsNoTimeout(t *testing.T) {
	const timeout, readDelay = 100 * time.Millisecond, 150 * time.Millisecond
	srv := redistest.StartServer(t)
	var delay atomic.Int64
	client := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr(),
		ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return slowReadConn{c.(*net.TCPConn), &delay}, nil
		},
	})
	t.Cleanup(func() { client.Close() })
	store := newStore(t, client, newPrefix(t), nil)
	lim := newLimiterWith(t, store, timeout)
	p := mustValidate(t, &limiter.Policy{Name: "cpu", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Hour, OnStoreError: limiter.FailDeny})
	ctx := context.Background()
	if d := lim.Allow(ctx, p, "warm", 1); d.Err != nil {
		t.Fatal(d.Err)
	}
	delay.Store(int64(readDelay))
	failed := int64(0)
	for i := range 5 {
		start := time.Now()
		var d limiter.Decision
		stalled := measureStalls(func() { d = lim.Allow(ctx, p, "k", 1) })
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case d.Err != nil && stalled >= (2*timeout-readDelay)/2:
			t.Logf("check %d failed after %s while the machine stalled %s: %v", i, took, stalled, d.Err)
		case d.Err != nil || !d.Allowed:
			t.Errorf("check %d (reply in the socket, read after %s), the machine stalling at most %s: %+v", i, readDelay, stalled, d)
		default:
			t.Logf("check %d answered after %s", i, took)
		}
		// A check that timed out may have charged, or not.
		if d.Err == nil {
			if want := int64(100 - 1 - i); d.Remaining < want || d.Remaining > want+failed {
				t.Errorf("check %d: remaining %d, want %d", i, d.Remaining, want)
			}
		} else {
			failed++
		}
	}
	if failed > 1 {
		t.Errorf("%d of 5 checks failed during stalls of the machine: too many to tell the store's failures from the machine's", failed)
	}
	delay.Store(0)
	// A reply that has not arrived is still a timeout.
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer srv.Thaw()
	start := time.Now()
	var d limiter.Decision
	stalled := measureStalls(func() { d = lim.Allow(ctx, p, "k", 1) })
	if d.Err == nil || d.Allowed {
		t.Errorf("hung Redis: %+v, want a store error", d)
	}
	if took := time.Since(start); took > timeout+40*time.Millisecond+stalled {
		t.Errorf("a check on a hung Redis took %s, the machine stalling at most %s, want about %s", took, stalled, timeout)
	}
}

// A 3+3 Cluster loses a master to kill -9 under load from three gateways:
// keys on the healthy masters never see an error, and the dead master's
// keys are served again (by its promoted replica) within the node timeout
// plus 2s. Redis itself needs the node timeout and about a second more to
// promote the replica; the store follows within one slot-map refresh.
//
// cluster-require-full-coverage no: with the default (yes) every master
// answers CLUSTERDOWN from the moment the dead one is marked failed until
// its replica is promoted, whatever the client does.
//
// The store timeout is 250ms here, not 50ms: what is tested is that a dead
// master fails only its own keys, and seven redis-servers, three gateways
// and the race detector on two shared cores can starve a check of CPU for
// longer than 50ms (TestSlowRedisFailsNoCheck holds the 50ms). Where the
// jitter probes saw this process or a Redis node kept waiting half the
// timeout, a failed check is the machine's, not the store's (a run with
// many such checks is run again: see judge); the time bounds grow by the
// worst stall seen.
func TestClusterFailoverTouchesOnlyItsShard(t *testing.T) {
	judge(t, func(v *verdict) {
		const nodeTimeout = time.Second
		const timeout = 250 * time.Millisecond
		c := redistest.StartCluster(t, redistest.WithReplicas(1),
			redistest.WithConfig("cluster-node-timeout", strconv.Itoa(int(nodeTimeout/time.Millisecond))),
			redistest.WithConfig("cluster-require-full-coverage", "no"))
		prefix := newPrefix(t)
		var limiters []*limiter.Limiter
		for range 3 {
			limiters = append(limiters, newLimiterWith(t, open(t, redisstore.ClientOptions{Cluster: c.Addrs(), Timeout: timeout}, prefix), timeout))
		}
		p := mustValidate(t, &limiter.Policy{Name: "fo", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second, OnStoreError: limiter.FailDeny})
		healthStore := open(t, redisstore.ClientOptions{Cluster: c.Addrs(), Timeout: timeout}, prefix)
		// The masters own contiguous thirds of the slots, the first the lowest.
		shard := map[string]int{}
		var keys []string
		for i := range 30 {
			key := fmt.Sprintf("key%d", i)
			keys = append(keys, key)
			shard[key] = redisSlot(healthStore.Keys(p, key)[0]) * 3 / 16384
		}
		victim := c.Nodes()[0]
		replica := c.Replicas()[0]

		var pids []func() int
		for _, n := range append(c.Nodes(), c.Replicas()...) {
			pids = append(pids, n.Pid)
		}
		l := &load{limiters: append(limiters, newLimiterWith(t, healthStore, timeout)), policy: p, keys: keys, workers: 6, pause: 2 * time.Millisecond, others: schedProbe(pids...)}
		// promotedAt: the replica calls itself master; agreedAt: every healthy
		// master's slot map names it, the earliest the store can learn of it.
		var killAt, promotedAt, agreedAt, healthFrom, healthTo time.Duration
		healthDuring := make(chan redisstore.Health, 1)
		promoted := make(chan struct{})
		started := make(chan struct{})
		l.onStart = func() { close(started) }
		go func() {
			<-started
			time.Sleep(time.Second + 600*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			healthFrom = time.Since(l.start)
			h := healthStore.Health(ctx)
			healthTo = time.Since(l.start)
			healthDuring <- h
		}()
		go func() {
			defer close(promoted)
			<-started
			time.Sleep(time.Second)
			killAt = time.Since(l.start)
			if err := victim.Kill(); err != nil {
				t.Errorf("kill: %v", err)
				return
			}
			rc := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
			defer rc.Close()
			for time.Since(l.start) < 7*time.Second {
				info, err := rc.Info(context.Background(), "replication").Result()
				if err == nil && strings.Contains(info, "role:master") {
					promotedAt = time.Since(l.start)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			for promotedAt > 0 && time.Since(l.start) < 7*time.Second {
				if slotZeroOwnedBy(c.Nodes()[1:], replica.Addr()) {
					agreedAt = time.Since(l.start)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		l.run(nil, time.Second+nodeTimeout+4*time.Second)
		<-promoted

		var healthyErrs, victimErrs int
		v.checks = len(l.samples)
		var lastVictimErr time.Duration = -1
		var healthyDuring, victimDuring []sample
		stalled := func(s sample) bool {
			if worst := l.stallFor(s, timeout); worst >= timeout/2 {
				v.excused++
				t.Logf("key %s failed at +%s after %s while the machine stalled %s: %v", s.key, s.at, s.took, worst, s.err)
				return true
			}
			return false
		}
		for _, s := range l.samples {
			if s.at+s.took < killAt {
				if s.err != nil && !stalled(s) {
					v.Errorf("before the kill: %v", s.err)
				}
				continue
			}
			if shard[s.key] == 0 {
				victimDuring = append(victimDuring, s)
				if s.err != nil {
					victimErrs++
					lastVictimErr = s.at + s.took
				}
			} else {
				healthyDuring = append(healthyDuring, s)
				if s.err != nil && !stalled(s) {
					if healthyErrs++; healthyErrs <= 3 {
						v.Errorf("key %s on a healthy master failed at +%s after the kill: %v", s.key, s.at-killAt, s.err)
					}
				}
			}
		}
		recovery := lastVictimErr - killAt
		t.Logf("kill -9 of a master, cluster-node-timeout %s: replica promoted %s after the kill; the store served its keys again %s after the kill",
			nodeTimeout, (promotedAt - killAt).Round(time.Millisecond), recovery.Round(time.Millisecond))
		t.Logf("keys on healthy masters: %s", stats(healthyDuring))
		t.Logf("keys on the killed master: %s", stats(victimDuring))
		if healthyErrs > 0 {
			v.Errorf("%d checks of keys on healthy masters failed", healthyErrs)
		}
		h := <-healthDuring
		t.Logf("health 600ms after the kill: %+v", h)
		if h.State == redisstore.StateUp || len(h.Nodes) != 3 {
			v.Errorf("health 600ms after the kill: %+v, want the dead master reported, three masters", h)
		}
		for _, n := range h.Nodes {
			want := n.Addr == victim.Addr()
			switch worst := l.worstStall(healthFrom, healthTo); {
			case (n.State != redisstore.StateUp) == want:
			case !want && worst >= 100*time.Millisecond: // half the health call's 200ms
				t.Logf("health of %s: %s while the machine stalled %s", n.Addr, n.State, worst)
			default:
				v.Errorf("health of %s: %s (the dead master is %s)", n.Addr, n.State, victim.Addr())
			}
		}
		if victimErrs == 0 {
			t.Error("no check of the killed master's keys failed: was it killed?")
		}
		// Redis's own election is random (a 0.5–1s delay, more on a retry): the
		// store is held to following it within 500ms, and to the node timeout
		// plus 2s whenever Redis promoted in time to make that possible.
		// The store learns the new map from the nodes: it is held to following
		// within 500ms of the healthy masters all knowing it.
		t.Logf("the healthy masters all named the promoted replica %s after the kill", (agreedAt - killAt).Round(time.Millisecond))
		follow := lastVictimErr - agreedAt
		if worst := l.worstStall(agreedAt, lastVictimErr); agreedAt > 0 && follow > 500*time.Millisecond+worst {
			v.Errorf("the store followed the promotion after %s, the machine stalling at most %s meanwhile; want at most 500ms", follow, worst)
		}
		switch worst := l.worstStall(killAt, lastVictimErr); {
		case promotedAt > 0 && promotedAt-killAt > nodeTimeout+1500*time.Millisecond:
			t.Logf("Redis promoted late (%s after the kill): the node-timeout+2s bound is not the store's to keep this time", promotedAt-killAt)
		case recovery > nodeTimeout+2*time.Second+worst:
			v.Errorf("the killed master's keys failed until %s after the kill, the machine stalling at most %s meanwhile; want at most %s", recovery, worst, nodeTimeout+2*time.Second)
		}
		// And they are served after recovery.
		var lateOK bool
		for _, s := range victimDuring {
			if s.at > lastVictimErr && s.err == nil {
				lateOK = true
			}
		}
		if !lateOK {
			t.Error("the killed master's keys were never served again")
		}
	})
}

// slotZeroOwnedBy reports whether every one of nodes names addr as the
// master of slot 0.
func slotZeroOwnedBy(nodes []*redistest.Server, addr string) bool {
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		slots, err := c.ClusterSlots(context.Background()).Result()
		c.Close()
		if err != nil || !slices.ContainsFunc(slots, func(s redis.ClusterSlot) bool {
			return s.Start == 0 && len(s.Nodes) > 0 && s.Nodes[0].Addr == addr
		}) {
			return false
		}
	}
	return true
}

// A Redis outage at 120 checks a second writes at most one store-error line
// per policy per second, each carrying the number it stands for.
func TestOutageLogsOncePerSecond(t *testing.T) {
	srv := redistest.StartServer(t)
	store := open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, newPrefix(t))
	var buf syncbuf.Buffer
	lim, err := limiter.New(store, limiter.WithTimeout(storeTimeout), limiter.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	p := mustValidate(t, &limiter.Policy{Name: "outage", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	const rate, span = 120, 2500 * time.Millisecond
	start := time.Now()
	checks := 0
	for time.Since(start) < span {
		if d := lim.Allow(context.Background(), p, "k", 1); d.Err == nil {
			t.Fatal("a check succeeded with Redis stopped")
		}
		checks++
		time.Sleep(time.Second / rate)
	}
	elapsed := time.Since(start) // past span when the machine is busy
	lines := buf.Lines()
	suppressed := 0
	for _, line := range lines {
		i := strings.Index(line, "suppressed=")
		if i < 0 {
			t.Errorf("line without suppressed=: %s", line)
			continue
		}
		n, _ := strconv.Atoi(strings.Fields(line[i+len("suppressed="):])[0])
		suppressed += n
	}
	t.Logf("%d failed checks in %s: %d lines, %d suppressed", checks, elapsed.Round(time.Millisecond), len(lines), suppressed)
	if max := int(elapsed/time.Second) + 1; len(lines) > max {
		t.Errorf("%d lines in %s, want at most %d", len(lines), elapsed.Round(time.Millisecond), max)
	}
	if suppressed+len(lines) > checks || suppressed < checks/2 {
		t.Errorf("%d lines reporting %d suppressed, for %d failed checks", len(lines), suppressed, checks)
	}
}

// Open finds the master through Sentinel; checks and health work.
func TestOpenThroughSentinel(t *testing.T) {
	srv := redistest.StartServer(t)
	sen := redistest.StartSentinel(t, srv, "costgate")
	store := open(t, redisstore.ClientOptions{Sentinel: &redisstore.SentinelOptions{Master: "costgate", Addrs: []string{sen.Addr()}}}, newPrefix(t))
	lim := newLimiterOver(t, store)
	p := mustValidate(t, &limiter.Policy{Name: "sen", Algorithm: limiter.SlidingLog, Limit: 2, Period: time.Hour})
	reqs := []limiter.Request{{Policy: p, Key: "a", Cost: 1}, {Policy: mustValidate(t, &limiter.Policy{Name: "sen2", Algorithm: limiter.TokenBucket, Limit: 5, Period: time.Hour}), Key: "a", Cost: 1}}
	for i := range 3 {
		ds, ok := lim.AllowAll(context.Background(), reqs)
		if ok != (i < 2) || ds[len(ds)-1].Err != nil {
			t.Errorf("request %d: %v %+v", i, ok, ds)
		}
	}
	if h := store.Health(context.Background()); h.State != redisstore.StateUp || len(h.Nodes) != 1 {
		t.Errorf("health %+v, want up", h)
	}
}
