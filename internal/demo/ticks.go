package demo

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Bounds of GET /api/ticks: its count, and its interval in ms.
const (
	defaultTicks, maxTicks              = 10, 10_000
	defaultTickMs, minTickMs, maxTickMs = 1000, 100, 60_000
)

// Ticks answers GET /api/ticks?count=N&interval_ms=M: a stream of
// server-sent events, one tick at once and then one every M ms (default
// 1000, 100 to 60000), N of them (default 10, at most 10,000; 0: until the
// client goes away). It is the REST twin of the GraphQL ticker
// subscription: a long request, which a concurrency policy limits by the
// streams one caller holds open. Send Accept: text/event-stream, so that
// the server keeps the stream open past its write deadline.
func Ticks(w http.ResponseWriter, r *http.Request) {
	count, err := intParam(r, "count", defaultTicks, 0, maxTicks)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": err.Error()})
		return
	}
	ms, err := intParam(r, "interval_ms", defaultTickMs, minTickMs, maxTickMs)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": err.Error()})
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	t := time.NewTicker(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	for n := 1; count == 0 || n <= count; n++ {
		if n > 1 {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
		}
		fmt.Fprintf(w, "event: tick\ndata: {\"n\":%d,\"at\":%q}\n\n", n, time.Now().UTC().Format(time.RFC3339Nano))
		if rc.Flush() != nil {
			return // the client is gone
		}
	}
}

// intParam reads the query parameter name: def when absent, else an
// integer in [lo, hi].
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}
