package bench

import (
	"context"
	"runtime/pprof"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

type passWriter struct{ http.ResponseWriter }

func BenchmarkScratchShare(b *testing.B) {
	body := shopBody(b)
	alone := shopServer()
	inner := shopServer()
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(data))
		inner.ServeHTTP(&passWriter{w}, r.WithContext(r.Context()))
	})
	limited := graphqlLimiter(b, nil).Handler(shopServer())
	hs := []http.Handler{alone, wrapped, limited}
	names := []string{"alone", "wrapped", "limited"}
	serve := func(k int) time.Duration {
		h := hs[k]
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		start := processCPUNow(b)
		pprof.Do(req.Context(), pprof.Labels("h", names[k]), func(ctx context.Context) { h.ServeHTTP(w, req.WithContext(ctx)) })
		return processCPUNow(b) - start
	}
	for k := range hs {
		serve(k)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var sum [3]time.Duration
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			runtime.GC()
		}
		for j := range 3 {
			k := (i + j) % 3
			sum[k] += serve(k)
		}
	}
	b.ReportMetric(100*float64(sum[1]-sum[0])/float64(sum[0]), "wrapper-%")
	b.ReportMetric(100*float64(sum[2]-sum[0])/float64(sum[0]), "costgate-%")
}
