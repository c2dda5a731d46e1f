package redistest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server that can add
// latency to every reply, and counts the connections it accepted: a test
// sees a slow network, and how many connections a client opened to cope.
type Proxy struct {
	ln      net.Listener
	target  string
	latency atomic.Int64 // nanoseconds added to each chunk from the server
	accepts atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every connection
// to target. The caller must call [Proxy.Close].
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of reply bytes by d from the moment it
// arrived from the server; chunks keep their order and do not wait for one
// another, so the proxy adds latency without limiting throughput.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Accepted is the number of client connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepts.Load() }

// Close stops listening, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepts.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			client.Close()
			server.Close()
			continue
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer p.untrack(server)
			defer p.untrack(client)
			copyChunks(server, client, nil)
		}()
		go func() {
			defer p.wg.Done()
			defer p.untrack(client)
			defer p.untrack(server)
			copyChunks(client, server, &p.latency)
		}()
	}
}

type chunk struct {
	due  time.Time
	data []byte
}

// copyChunks copies src to dst; with a latency, each chunk read is written
// that long after it was read, by a second goroutine so reads go on.
func copyChunks(dst, src net.Conn, latency *atomic.Int64) {
	if latency == nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	queue := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range queue {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				for range queue { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	defer func() { close(queue); <-done }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{due: time.Now().Add(time.Duration(latency.Load())), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			return
		}
	}
}
