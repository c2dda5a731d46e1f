package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/costgate/costgate/limiter/redistest"
)

// login posts a login to base and returns the status.
func login(t *testing.T, base, user, password string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/login", strings.NewReader(fmt.Sprintf(`{"username":%q,"password":%q}`, user, password)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, _ := do(t, req)
	return res.StatusCode
}

// The demo's login limits (10 per 5 minutes by address and by username)
// carry refund_status: [2xx], in memory and on Redis: a user who logs in
// successfully never locks themselves out, ten failures lock, and twenty
// wrong passwords sent at once cannot pass the limit together, since each
// is charged when it starts and only a success is given back.
func TestBinaryLoginCountsFailuresOnly(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			gateway := func(t *testing.T) string {
				t.Helper()
				if store == "memory" {
					return start(t, nil, "-addr", "127.0.0.1:0").Base
				}
				// The demo's login limits on Redis, with a store timeout a
				// loaded machine's stall cannot pass: these policies fail
				// closed, and a check that timed out would answer 503.
				return start(t, nil, "-config", writeConfig(t, `listen: "127.0.0.1:0"
store:
  redis: {url: "redis://`+redistest.StartServer(t).Addr()+`/0", timeout: 2s}
identity:
  hash_key: "login-test-hash-key-0123456789"
policies:
  login_ip:   {algorithm: sliding_log, limit: 10, period: 5m, key: [ip],       on_store_error: deny, refund_status: [2xx]}
  login_user: {algorithm: sliding_log, limit: 10, period: 5m, key: [username], on_store_error: deny, refund_status: [2xx]}
routes:
  - {match: "POST /login", policies: [login_ip, login_user]}
graphql: {path: ""}
`)).Base
			}
			t.Run("30 successful logins", func(t *testing.T) {
				base := gateway(t)
				for i := range 30 {
					if got := login(t, base, "alice", "wonderland"); got != http.StatusOK {
						t.Fatalf("login %d of alice: %d, want 200", i+1, got)
					}
				}
			})
			t.Run("10 failures lock", func(t *testing.T) {
				base := gateway(t)
				for i := range 10 {
					if got := login(t, base, "bob", "wrong"); got != http.StatusUnauthorized {
						t.Fatalf("failure %d: %d, want 401", i+1, got)
					}
				}
				if got := login(t, base, "bob", "builder"); got != http.StatusTooManyRequests {
					t.Errorf("bob's right password after 10 failures: %d, want 429", got)
				}
			})
			t.Run("20 wrong passwords at once", func(t *testing.T) {
				base := gateway(t)
				codes := make([]int, 20)
				var wg sync.WaitGroup
				for i := range codes {
					wg.Go(func() { codes[i] = login(t, base, "bob", fmt.Sprintf("guess-%d", i)) })
				}
				wg.Wait()
				count := map[int]int{}
				for _, c := range codes {
					count[c]++
				}
				if count[http.StatusUnauthorized] != 10 || count[http.StatusTooManyRequests] != 10 {
					t.Errorf("20 concurrent guesses: %v, want 10 answered 401 and 10 refused 429", count)
				}
			})
		})
	}
}
