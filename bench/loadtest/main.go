// Command loadtest measures the whole costgate server against a reference
// server a Go user might write instead (chi plus go-redis/redis_rate, or
// sethvargo/go-limiter in memory; see ../refserver), at fixed request
// rates over loopback, with vegeta as the load generator.
//
//	cd bench && go run ./loadtest -out loadtest.md
//
// It builds both servers, starts a redis-server (limiter/redistest), and
// for each scenario steps the rate up (-rates). At each rate it runs every
// contender -reps times, interleaved (A B B A …) so that a busy spell of
// the machine hits all of them, each step -duration long. A contender stops
// at the first rate it does not sustain: p99 above -p99, any error, or
// less than 95% of the rate sent. It writes a markdown report (-out) and,
// with -json, every figure.
//
// Per contender and rate it reports the client-side latency quantiles,
// the quantiles of the server's own check histogram over the step (from the
// bucket deltas of two /metrics scrapes), the server's CPU time per request
// (/proc/<pid>/stat), Redis's (INFO cpu), and allocations per request (the
// Go runtime's counters on /metrics, less what a scrape allocates).
//
// It is a program rather than a test so that it takes flags, and so that
// no go test invocation (CI's, or -bench=.) can start it by accident.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter/redistest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	rates     []int
	duration  time.Duration
	warmup    time.Duration
	reps      int
	p99Limit  time.Duration
	keys      int
	scenarios []string
	out, json string
	// pins are the CPU layouts run, in order: unpinned (false, the
	// headline) and pinned (true, with cpus).
	pins       []bool
	cpus       [3]string // servers, redis, client
	graphql    bool
	sync       bool
	floor      bool
	allRates   bool
	costgate   string
	refserver  string
	keep       bool
	commandTxt string
}

func parseFlags(args []string, log io.Writer) (*options, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(log)
	o := &options{}
	rates := fs.String("rates", "1000,2000,4000,6000,8000,10000,12000", "request rates per second, stepped up in this order")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of one step")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load at the first rate before a contender's first step")
	fs.IntVar(&o.reps, "reps", 2, "steps per contender and rate, interleaved with the other contenders'")
	fs.DurationVar(&o.p99Limit, "p99", 2*time.Millisecond, "a rate is sustained while p99 stays at or under this")
	fs.IntVar(&o.keys, "keys", 200, "API keys the requests cycle through (one bucket each)")
	fs.BoolVar(&o.graphql, "graphql", true, "also run costgate's GraphQL endpoint (Redis scenario)")
	fs.BoolVar(&o.allRates, "all-rates", false, "run every rate even after a contender failed one (its highest sustained rate stays the one before), to compare CPU per request on a busy machine")
	fs.BoolVar(&o.sync, "sync", false, "also run costgate-sync: costgate with sync: 100ms on its REST policy (local-first; Redis scenario)")
	fs.BoolVar(&o.floor, "floor", true, "also run the floor: the reference server with its limiter replaced by one EVALSHA of a script that returns at once (Redis scenario), the least any limiter on net/http and Redis costs")
	scenarios := fs.String("scenarios", "redis,memory", "scenarios to run: redis (REST and GraphQL on Redis), memory (REST in memory)")
	fs.StringVar(&o.out, "out", "", "markdown report file (default: standard output)")
	fs.StringVar(&o.json, "json", "", "also write every figure as JSON to this file")
	pinMode := fs.String("pin", "both", "both: a run with nothing pinned (the headline, as users run servers), then one pinned; auto: only pinned (servers, Redis and this client on separate CPUs with taskset, see -cpus); off: only unpinned")
	cpus := fs.String("cpus", "", "servers/redis/client CPU lists for taskset, e.g. 0/1/1 (default: split by nproc)")
	fs.StringVar(&o.costgate, "costgate", "", "costgate binary to run (default: go build the root module)")
	fs.StringVar(&o.refserver, "refserver", "", "reference server binary (default: go build ./refserver)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, server logs)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, f := range strings.Split(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-rates: %q is not a positive integer", f)
		}
		o.rates = append(o.rates, r)
	}
	if !slices.IsSorted(o.rates) {
		return nil, errors.New("-rates: must increase")
	}
	if o.reps < 1 || o.keys < 1 || o.duration <= 0 {
		return nil, errors.New("-reps, -keys and -duration must be positive")
	}
	for _, s := range strings.Split(*scenarios, ",") {
		if s = strings.TrimSpace(s); s != "redis" && s != "memory" {
			return nil, fmt.Errorf("-scenarios: %q: want redis or memory", s)
		}
		o.scenarios = append(o.scenarios, strings.TrimSpace(s))
	}
	pinned := false
	switch *pinMode {
	case "both":
		o.pins, pinned = []bool{false, true}, true
	case "auto":
		o.pins, pinned = []bool{true}, true
	case "off":
		o.pins = []bool{false}
	default:
		return nil, fmt.Errorf("-pin %q: want both, auto or off", *pinMode)
	}
	if pinned {
		if *cpus != "" {
			parts := strings.Split(*cpus, "/")
			if len(parts) != 3 {
				return nil, fmt.Errorf("-cpus %q: want servers/redis/client", *cpus)
			}
			copy(o.cpus[:], parts)
		} else {
			o.cpus[0], o.cpus[1], o.cpus[2] = cpuLayout(runtime.NumCPU())
		}
		_, err := exec.LookPath("taskset")
		if err != nil {
			fmt.Fprintln(log, "loadtest: taskset not found: no pinned run")
		}
		if err != nil || o.cpus[0] == "" {
			o.pins, o.cpus = slices.DeleteFunc(o.pins, func(p bool) bool { return p }), [3]string{}
		}
		if len(o.pins) == 0 {
			return nil, errors.New("-pin auto: cannot pin here (taskset missing or one CPU)")
		}
	}
	o.commandTxt = commandText(args)
	return o, nil
}

// commandText is the command line of the run as the report shows it: the
// output files left out.
func commandText(args []string) string {
	out := []string{"go", "run", "./loadtest"}
	for i := 0; i < len(args); i++ {
		name := strings.TrimLeft(args[i], "-")
		if name == "out" || name == "json" {
			i++
			continue
		}
		if strings.HasPrefix(name, "out=") || strings.HasPrefix(name, "json=") {
			continue
		}
		out = append(out, args[i])
	}
	return strings.Join(out, " ")
}

func run(ctx context.Context, args []string, log io.Writer) error {
	o, err := parseFlags(args, log)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "costgate-loadtest-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(log, "loadtest: work directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	if o.costgate == "" || o.refserver == "" {
		fmt.Fprintln(log, "loadtest: building costgate and the reference server")
		cg, ref, err := build(ctx, dir)
		if err != nil {
			return err
		}
		if o.costgate == "" {
			o.costgate = cg
		}
		if o.refserver == "" {
			o.refserver = ref
		}
	}
	keysPath := filepath.Join(dir, "api-keys.json")
	if err := writeAPIKeys(keysPath, o.keys); err != nil {
		return err
	}

	rep := &report{opts: o}
	for _, pinned := range o.pins {
		clientCPUs := runtime.NumCPU()
		if pinned {
			// Last: the unpinned run must not inherit this process's pinning.
			if err := pin(os.Getpid(), o.cpus[2]); err != nil {
				return err
			}
			clientCPUs = cpuCount(o.cpus[2])
			runtime.GOMAXPROCS(clientCPUs)
			fmt.Fprintf(log, "loadtest: pinned: servers on CPUs %s, redis-server on %s, this client on %s\n", o.cpus[0], o.cpus[1], o.cpus[2])
		} else {
			fmt.Fprintln(log, "loadtest: unpinned: the servers, Redis and this client share every CPU")
		}
		for _, name := range o.scenarios {
			if err := ctx.Err(); err != nil {
				return err
			}
			sc, err := runScenario(ctx, o, name, pinned, dir, keysPath, clientCPUs, log)
			if err != nil {
				return fmt.Errorf("scenario %s: %w", name, err)
			}
			rep.scenarios = append(rep.scenarios, sc)
		}
	}
	rep.finished = time.Now()

	out := io.Writer(os.Stdout)
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	if err := rep.markdown(out); err != nil {
		return err
	}
	if o.json != "" {
		data, err := json.MarshalIndent(rep.jsonValue(), "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scenario is what one scenario measured: its contenders, the first one
// the base the others are compared with.
type scenario struct {
	name       string
	title      string
	pinned     bool
	clientCPUs int
	contenders []*contender
	// stateBytes is the Redis memory (MEMORY USAGE) per key of each
	// contender's limiter state after the run, by contender id.
	stateBytes map[string]float64
}

// runScenario starts the scenario's servers (and Redis), steps the rate
// up, and stops them.
func runScenario(ctx context.Context, o *options, name string, pinned bool, dir, keysPath string, clientCPUs int, log io.Writer) (*scenario, error) {
	h := &harness{scrapeCost: map[*server][2]float64{}}
	serverCPUs := ""
	if pinned {
		serverCPUs = o.cpus[0]
	}
	var redisURL string
	if name == "redis" {
		rs, err := redistest.NewServer()
		if err != nil {
			return nil, fmt.Errorf("redis-server (apt-get install -y redis-server): %w", err)
		}
		defer rs.Close()
		redisURL = "redis://" + rs.Addr() + "/0"
		h.redis = redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer h.redis.Close()
		if pinned {
			pid, err := redisPID(ctx, h.redis)
			if err != nil {
				return nil, err
			}
			if err := pin(pid, o.cpus[1]); err != nil {
				return nil, err
			}
		}
	}
	cfgPath, err := writeFile(dir, "costgate-"+name+".yaml", costgateConfig(redisURL, o.keys, ""))
	if err != nil {
		return nil, err
	}
	cg, err := startServer("costgate", o.costgate, []string{"-config", cfgPath}, serverCPUs,
		filepath.Join(dir, "costgate-"+name+".log"), "costgate")
	if err != nil {
		return nil, err
	}
	defer cg.stop()
	ref, err := startServer("reference", o.refserver, refserverArgs(name, redisURL, keysPath), serverCPUs,
		filepath.Join(dir, "refserver-"+name+".log"), "refserver")
	if err != nil {
		return nil, err
	}
	defer ref.stop()
	servers := []*server{ref, cg}

	sc := &scenario{name: name, pinned: pinned, clientCPUs: clientCPUs}
	switch name {
	case "redis":
		sc.title = "Redis store"
		sc.contenders = []*contender{
			{id: "reference", label: "reference REST (chi + redis_rate)", srv: ref, target: restTargeter(ref.base, o.keys)},
			{id: "costgate", label: "costgate REST", srv: cg, target: restTargeter(cg.base, o.keys)},
		}
		if o.sync {
			// The same limit, decided locally and reconciled with Redis
			// every 100ms, under keys of its own.
			path, err := writeFile(dir, "costgate-sync.yaml", costgateConfig(redisURL, o.keys, "100ms"))
			if err != nil {
				return nil, err
			}
			cs, err := startServer("costgate-sync", o.costgate, []string{"-config", path}, serverCPUs,
				filepath.Join(dir, "costgate-sync.log"), "costgate")
			if err != nil {
				return nil, err
			}
			defer cs.stop()
			servers = append(servers, cs)
			sc.contenders = append(sc.contenders, &contender{id: "costgate-sync", label: "costgate REST, sync: 100ms", srv: cs, target: restTargeter(cs.base, o.keys)})
		}
		if o.floor {
			fl, err := startServer("floor", o.refserver, refserverArgs("floor", redisURL, keysPath), serverCPUs,
				filepath.Join(dir, "refserver-floor.log"), "refserver")
			if err != nil {
				return nil, err
			}
			defer fl.stop()
			servers = append(servers, fl)
			sc.contenders = append(sc.contenders, &contender{id: "floor", label: "floor: chi + one no-op EVALSHA, no limiter", srv: fl, target: restTargeter(fl.base, o.keys)})
		}
		if o.graphql {
			gql, err := graphqlTargeter(cg.base, o.keys)
			if err != nil {
				return nil, err
			}
			sc.contenders = append(sc.contenders, &contender{id: "costgate-graphql", label: "costgate GraphQL (30 fields)", srv: cg, target: gql, graphql: true})
		}
	case "memory":
		sc.title = "in-memory store"
		sc.contenders = []*contender{
			{id: "reference", label: "reference REST (chi + go-limiter memorystore)", srv: ref, target: restTargeter(ref.base, o.keys)},
			{id: "costgate", label: "costgate REST", srv: cg, target: restTargeter(cg.base, o.keys)},
		}
	}
	for _, c := range sc.contenders {
		c.runs, c.clientCPUs = map[int][]*stepRun{}, clientCPUs
		fmt.Fprintf(log, "loadtest: %s: warming up %s\n", name, c.id)
		attack(c, o.rates[0], o.warmup)
	}
	for _, s := range servers {
		if err := h.calibrate(s); err != nil {
			return nil, err
		}
	}

	active := slices.Clone(sc.contenders)
	for _, rate := range o.rates {
		if len(active) == 0 {
			break
		}
		for rep := range o.reps {
			order := slices.Clone(active)
			if rep%2 == 1 {
				slices.Reverse(order)
			}
			for _, c := range order {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run, err := h.step(ctx, c, rate, o.duration)
				if err != nil {
					return nil, err
				}
				c.runs[rate] = append(c.runs[rate], run)
				s := summarize(rate, []*stepRun{run}, clientCPUs)
				fmt.Fprintf(log, "loadtest: %s%s %6d/s rep %d/%d %-17s sent %7.0f/s p50 %6.3fms p99 %6.3fms p99.9 %6.3fms failures %d store errors %.0f cpu %5.1fµs/req client cpu %3.0f%%\n",
					name, pinText(pinned), rate, rep+1, o.reps, c.id, s.SentRate, s.P50, s.P99, s.P999, s.Failures, s.StoreErrors, s.ServerCPU, 100*s.ClientCPU)
				time.Sleep(200 * time.Millisecond)
			}
		}
		active = slices.DeleteFunc(active, func(c *contender) bool {
			s := summarize(rate, c.runs[rate], clientCPUs)
			if c.failedAt != 0 {
				return false // -all-rates: failed before, kept running
			}
			if reason := sustainFailure(s, o.p99Limit); reason != "" {
				c.failedAt, c.failReason = rate, reason
				fmt.Fprintf(log, "loadtest: %s: %s stops at %d/s: %s\n", name, c.id, rate, reason)
				return !o.allRates
			}
			return false
		})
	}
	if h.redis != nil {
		sc.stateBytes = map[string]float64{}
		for id, pattern := range map[string]string{"reference": "rate:*", "costgate": "rl:*", "costgate-sync": "rs:*"} {
			if b, ok, err := stateBytes(ctx, h.redis, pattern); err != nil {
				return nil, err
			} else if ok {
				sc.stateBytes[id] = b
			}
		}
	}
	return sc, nil
}

// pinText marks the progress lines of the pinned run.
func pinText(pinned bool) string {
	if pinned {
		return " pinned"
	}
	return ""
}

// stateBytes is the mean MEMORY USAGE of the keys matching pattern, and
// whether there is any.
func stateBytes(ctx context.Context, c *redis.Client, pattern string) (float64, bool, error) {
	var total, n int64
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		b, err := c.MemoryUsage(ctx, iter.Val()).Result()
		if err == redis.Nil {
			continue // expired meanwhile
		}
		if err != nil {
			return 0, false, fmt.Errorf("MEMORY USAGE %s: %w", iter.Val(), err)
		}
		total, n = total+b, n+1
	}
	if err := iter.Err(); err != nil {
		return 0, false, err
	}
	if n == 0 {
		return 0, false, nil
	}
	return float64(total) / float64(n), true, nil
}

// sustainFailure says why s is not a sustained rate, or "" when it is.
func sustainFailure(s summary, p99Limit time.Duration) string {
	limit := float64(p99Limit) / float64(time.Millisecond)
	switch {
	case s.Failures > 0:
		return fmt.Sprintf("%d of %d requests failed (%s)", s.Failures, s.Requests, s.Error)
	case s.StoreErrors > 0:
		return fmt.Sprintf("%.0f checks failed in the store (served under on_store_error: allow; see the server's log)", s.StoreErrors)
	case s.SentRate < 0.95*float64(s.Rate):
		return fmt.Sprintf("only %.0f/s sent", s.SentRate)
	case s.P99 > limit:
		return fmt.Sprintf("p99 %.3fms > %.3fms", s.P99, limit)
	}
	return ""
}
