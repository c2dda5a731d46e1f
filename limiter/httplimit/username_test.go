package httplimit_test

import (
	"fmt"
	"net/http"
	"testing"
)

// Every login whose username cannot be limited by is refused after being
// charged to the policies that do not key by username: bad bodies spend
// the sender's per-IP attempts like any other login.
func TestBadLoginBodiesChargedToTheAddress(t *testing.T) {
	s := newTestServer(t, serverOpts{})
	bad := []string{`{"username":"  "}`, `{"username":""}`, "{\"username\":\"\xff\"}", `{"password":"x"}`, `username=alice`, ``}
	for i := range 10 {
		body := bad[i%len(bad)]
		w := s.do(request{method: "POST", path: "/login", remote: "203.0.113.40:1", body: body})
		if w.Code != http.StatusBadRequest || w.Header().Get("X-RateLimit-Remaining") != fmt.Sprint(9-i) {
			t.Errorf("body %q: status %d, remaining %q; want 400 with login_ip's %d", body, w.Code, w.Header().Get("X-RateLimit-Remaining"), 9-i)
		}
	}
	if w := s.do(request{method: "POST", path: "/login", remote: "203.0.113.40:1", body: `{"username":"zed"}`}); w.Code != http.StatusTooManyRequests {
		t.Errorf("after 10 bad bodies, a good login from the address: status %d, want 429 (login_ip spent)", w.Code)
	}
}
