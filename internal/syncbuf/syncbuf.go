// Package syncbuf is a buffer goroutines may share: the log a test reads
// while the code under test (a logger, a child process) writes to it.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines are the non-empty lines written so far.
func (b *Buffer) Lines() []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
