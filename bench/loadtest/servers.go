package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// build compiles the costgate command (the root module) and the reference
// server into dir, and returns their paths.
func build(ctx context.Context, dir string) (costgate, refserver string, err error) {
	benchDir, err := goOutput(ctx, "", "env", "GOMOD")
	if err != nil {
		return "", "", err
	}
	benchDir = filepath.Dir(benchDir)
	// The replace directive of bench/go.mod points at the root module.
	rootDir, err := goOutput(ctx, benchDir, "list", "-m", "-f", "{{.Dir}}", "github.com/costgate/costgate")
	if err != nil {
		return "", "", err
	}
	costgate, refserver = filepath.Join(dir, "costgate"), filepath.Join(dir, "refserver")
	if _, err := goOutput(ctx, rootDir, "build", "-o", costgate, "."); err != nil {
		return "", "", err
	}
	if _, err := goOutput(ctx, benchDir, "build", "-o", refserver, "./refserver"); err != nil {
		return "", "", err
	}
	return costgate, refserver, nil
}

func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// server is a server process under test: costgate or the reference.
type server struct {
	name    string
	pid     int
	base    string // http://host:port
	logPath string
	// histogram is the name of the check-duration histogram it exposes,
	// storeErrors the counter of checks the store failed to answer.
	histogram, storeErrors string
	// client is kept across steps so that its connections stay warm.
	client *http.Client

	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// startTimeout bounds how long a server may take to log that it listens.
const startTimeout = 30 * time.Second

// startServer runs bin with args (under taskset -c cpus when cpus is not
// empty), its stderr logged to logPath, and returns once it has logged its
// "... listening" line and answers /healthz. Every server logs JSON lines,
// the listening one with the address it bound. Its metrics are named
// metricPrefix_check_duration_seconds and metricPrefix_store_errors_total.
func startServer(name, bin string, args []string, cpus, logPath, metricPrefix string) (*server, error) {
	if cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{
		name: name, pid: cmd.Process.Pid, logPath: logPath, cmd: cmd, done: make(chan struct{}),
		histogram: metricPrefix + "_check_duration_seconds", storeErrors: metricPrefix + "_store_errors_total",
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logFile.Write(append(line, '\n'))
			var entry struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &entry) == nil && strings.HasSuffix(entry.Msg, " listening") && entry.Addr != "" {
				select {
				case addrc <- entry.Addr:
				default:
				}
			}
		}
		io.Copy(logFile, stderr)
		s.err = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	select {
	case addr := <-addrc:
		s.base = "http://" + addr
	case <-s.done:
		return nil, fmt.Errorf("%s exited at start (%v); its log: %s", name, s.err, tail(logPath))
	case <-time.After(startTimeout):
		s.stop()
		return nil, fmt.Errorf("%s did not log that it listens within %v; its log: %s", name, startTimeout, tail(logPath))
	}
	s.client = &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: 10_000,
			// Past this, requests wait for a connection: an overloaded
			// server must not take the load generator past its open-file
			// limit (every contender runs every rate with -all-rates).
			MaxConnsPerHost:    4096,
			IdleConnTimeout:    time.Minute,
			DisableCompression: true,
		},
	}
	for deadline := time.Now().Add(startTimeout); ; {
		resp, err := s.client.Get(s.base + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s: /healthz did not answer 200 within %v (%v)", name, startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM, then SIGKILL if the process is still there after 10s.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
}

// alive returns an error when the process has exited.
func (s *server) alive() error {
	select {
	case <-s.done:
		return fmt.Errorf("%s exited (%v); its log: %s", s.name, s.err, tail(s.logPath))
	default:
		return nil
	}
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const n = 2000
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return "\n" + string(data)
}

// scrape reads the server's /metrics.
func (s *server) scrape() (*promText, error) {
	resp, err := s.client.Get(s.base + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: scrape: %w", s.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: scrape: %s", s.name, resp.Status)
	}
	return parsePromText(resp.Body)
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// processCPU returns the user plus system time of process pid, all its
// threads, from /proc/<pid>/stat (10ms resolution).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// pin moves every thread of process pid onto cpus (a taskset list).
// Threads created later inherit it from their creator.
func pin(pid int, cpus string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s %d: %w: %s", cpus, pid, err, out)
	}
	return nil
}

// cpuLayout splits n CPUs between the servers, Redis and the load
// generator: with 4 or more, the servers get the first half, Redis one CPU
// and the client the rest; with 2 or 3, the servers get CPU 0 and Redis
// and the client share the others; with 1 nothing is pinned.
func cpuLayout(n int) (servers, redis, client string) {
	switch {
	case n >= 4:
		return cpuRange(0, n/2-1), strconv.Itoa(n / 2), cpuRange(n/2+1, n-1)
	case n >= 2:
		return "0", cpuRange(1, n-1), cpuRange(1, n-1)
	}
	return "", "", ""
}

func cpuRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// cpuCount returns how many CPUs a taskset list names.
func cpuCount(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		n += b - a + 1
	}
	return n
}
