// Package proctest runs a server program a test stands in front of or
// behind (nginx, Caddy) as a real process: on a free loopback port, logging
// to a buffer the failure messages quote, stopped when the test ends (and
// killed with the test process on Linux).
package proctest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/costgate/costgate/internal/syncbuf"
)

// Find returns the binary name: on PATH, else at fallback (where Debian's
// package puts it). install is the command the error tells the user to run.
func Find(name, fallback, install string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback, nil
	}
	return "", fmt.Errorf("%s not found: install it with %q (as root)", name, install)
}

// Command is the program to run for the free address addr (127.0.0.1:PORT)
// in the test's temporary directory dir, and its config, quoted when the
// program fails to start.
type Command func(addr, dir string) (cmd *exec.Cmd, config string, err error)

// Process is a running program.
type Process struct {
	Addr string          // the 127.0.0.1:PORT it listens on
	Log  *syncbuf.Buffer // what it wrote to stdout and stderr
}

// Start runs command until it listens on its address (within 15 s), and
// stops it with stop (then, after 10 s, a kill) when the test ends. A free
// port can be taken between picking and binding it, so it tries three times.
func Start(tb testing.TB, name string, command Command, stop os.Signal) *Process {
	tb.Helper()
	var lastErr error
	for range 3 {
		p, err := start(tb, name, command, stop)
		if err == nil {
			return p
		}
		lastErr = err
	}
	tb.Fatal(lastErr)
	return nil
}

func start(tb testing.TB, name string, command Command, stop os.Signal) (*Process, error) {
	dir := tb.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, config, err := command(addr, dir)
	if err != nil {
		return nil, err
	}
	log := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s exited (%v):\n%s\nconfig:\n%s", name, err, log.String(), config)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return nil, errors.New(name + " did not listen within 15s:\n" + log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process for its port: no clock to inject
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(stop)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("%s log:\n%s", name, log.String())
		}
	})
	return &Process{Addr: addr, Log: log}, nil
}
