package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCORS(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("served")) })
	tests := []struct {
		name        string
		origins     []string
		method      string
		origin      string
		preflight   bool
		wantStatus  int
		wantAllow   string
		wantExposed bool
	}{
		{"no origin: not a CORS request", []string{"https://app.example"}, "POST", "", false, 200, "", false},
		{"allowed origin", []string{"https://app.example"}, "POST", "https://app.example", false, 200, "https://app.example", true},
		{"other origin: served, nothing allowed", []string{"https://app.example"}, "POST", "https://evil.example", false, 200, "", false},
		{"preflight from an allowed origin", []string{"https://app.example"}, "OPTIONS", "https://app.example", true, 204, "https://app.example", false},
		{"preflight from another origin", []string{"https://app.example"}, "OPTIONS", "https://evil.example", true, 403, "", false},
		{"any origin", []string{"*"}, "GET", "https://whoever.example", false, 200, "*", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newCORS(tc.origins, "X-API-Key").handler(next)
			r := httptest.NewRequest(tc.method, "/graphql", nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.preflight {
				r.Header.Set("Access-Control-Request-Method", "POST")
				r.Header.Set("Access-Control-Request-Headers", "content-type, x-api-key")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.wantStatus || w.Header().Get("Access-Control-Allow-Origin") != tc.wantAllow {
				t.Errorf("status %d, Allow-Origin %q; want %d, %q", w.Code, w.Header().Get("Access-Control-Allow-Origin"), tc.wantStatus, tc.wantAllow)
			}
			if exposed := w.Header().Get("Access-Control-Expose-Headers") != ""; exposed != tc.wantExposed {
				t.Errorf("Expose-Headers %q, want exposed %v", w.Header().Get("Access-Control-Expose-Headers"), tc.wantExposed)
			}
			if tc.preflight && tc.wantStatus == 204 && w.Header().Get("Access-Control-Allow-Headers") == "" {
				t.Error("a preflight without Allow-Headers")
			}
			if w.Header().Get("Access-Control-Allow-Credentials") != "" {
				t.Error("credentials allowed")
			}
		})
	}
}
