package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// stopTimeout is how long a server gets to exit after SIGTERM before it is killed.
	stopTimeout = 5 * time.Second
	// logTailBytes bounds the log excerpt included in start errors.
	logTailBytes = 2048
)

// errAddrInUse marks a start that failed because a port was taken between
// picking it and redis-server binding it.
var errAddrInUse = errors.New("address already in use")

// process is one running redis-server child.
type process struct {
	cmd       *exec.Cmd
	logPath   string
	logOffset int64         // size of the log file when the process was spawned
	done      chan struct{} // closed once the process has exited and been reaped
	err       error         // result of cmd.Wait; read only after done is closed
}

// spawn starts bin with the config file conf, appending its stdout and stderr
// to logPath.
func spawn(bin, dir, conf, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy of the descriptor
	fi, err := logf.Stat()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf // *os.File: no copying goroutines, Wait returns on exit
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, logPath: logPath, logOffset: fi.Size(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (p *process) signal(sig os.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// stop sends SIGTERM (plus SIGCONT, in case the process is frozen), waits up
// to stopTimeout for it to exit, then kills it. It returns once the process
// has been reaped.
func (p *process) stop() error {
	_ = p.signal(syscall.SIGTERM)
	_ = p.signal(syscall.SIGCONT)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill redis-server: %w", err)
	}
	<-p.done
	return nil
}

// waitReady polls addr until the server answers as process p, p exits, or
// timeout passes. On failure the process is left running (or reaped, when it
// exited) and the error includes the tail of its log.
func (p *process) waitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := 2 * time.Millisecond
	for {
		err := probe(addr, p.pid())
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer on %s within %v: %v; log tail:\n%s", addr, timeout, err, p.logTail())
		}
		t := time.NewTimer(delay)
		select {
		case <-p.done:
			t.Stop()
			tail := p.logTail()
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("redis-server exited (%v): %w; log tail:\n%s", p.err, errAddrInUse, tail)
			}
			return fmt.Errorf("redis-server exited (%v); log tail:\n%s", p.err, tail)
		case <-t.C:
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// logTail returns the end of what this process wrote to its log.
func (p *process) logTail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	start := max(p.logOffset, fi.Size()-logTailBytes)
	b := make([]byte, fi.Size()-start)
	if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(read log: %v)", err)
	}
	s := string(b)
	if start > p.logOffset {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = "...\n" + s
	}
	if s = strings.TrimRight(s, "\n"); s == "" {
		return "(empty)"
	}
	return s
}

// probe sends INFO server to addr and checks that the reply comes from the
// process with the given pid, so that a server of another test binary that
// grabbed the same port is never mistaken for ours.
func probe(addr string, pid int) error {
	conn, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return fmt.Errorf("unexpected reply %q", line) // e.g. -LOADING
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return fmt.Errorf("unexpected reply %q", line)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "\nprocess_id:"+strconv.Itoa(pid)+"\r") {
		return errors.New("port is served by another redis-server")
	}
	return nil
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago. They may be taken again before use; callers retry on errAddrInUse.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick free port: %w", err)
		}
		defer l.Close() // keep all open until done so the n ports are distinct
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
