package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// cdp is a minimal Chrome DevTools Protocol client over chromium's
// --remote-debugging-pipe: JSON messages, each ended by a NUL byte, written
// to the browser's fd 3 and read from its fd 4. No websocket, no port.
type cdp struct {
	w io.WriteCloser

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	onEvent func(cdpMessage) // called from the reader goroutine
	err     error            // set once the reader stops
	done    chan struct{}    // closed once the reader stops
	writeMu sync.Mutex
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *cdpError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("cdp error %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message)
}

func newCDP(w io.WriteCloser, r io.Reader, onEvent func(cdpMessage)) *cdp {
	c := &cdp{w: w, pending: map[int64]chan cdpMessage{}, onEvent: onEvent, done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *cdp) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m cdpMessage
		if jerr := json.Unmarshal(raw[:len(raw)-1], &m); jerr != nil {
			err = fmt.Errorf("cdp: bad message: %v", jerr)
			break
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if m.Method != "" && c.onEvent != nil {
			c.onEvent(m)
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("cdp: browser closed the pipe")
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// call sends method with params (to sessionID's target when not empty) and
// decodes the result into result (when not nil).
func (c *cdp) call(ctx context.Context, sessionID, method string, params, result any) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMessage, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if sessionID != "" {
		msg["sessionId"] = sessionID
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	b = append(b, 0)
	c.writeMu.Lock()
	_, err = c.w.Write(b)
	c.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("cdp: %s: %w", method, err)
	}

	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil && len(m.Result) > 0 {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-c.done:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}
