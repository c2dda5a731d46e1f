package routelimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// statusRecorder is the ResponseWriter of a request whose ticket ends with
// its status: the first final status written (200 once the body starts
// without one, or the handler returns without writing), 0 while there is
// none (a panic, a hijacked connection). It passes Flush, Hijack and ReadFrom
// through, and Unwrap lets http.ResponseController reach the connection.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps io.Copy's sendfile path (net/http's response implements it).
func (w *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// Flush sends what is buffered (a stream's events); it starts the body, so
// the status is 200 unless one was written.
func (w *statusRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (a websocket); the request then ends
// when the handler returns, with the status written before, if any.
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.hijacked = w.hijacked || err == nil
	return c, rw, err
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
