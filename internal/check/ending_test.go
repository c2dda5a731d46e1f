package check_test

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/check"
	"github.com/costgate/costgate/internal/routelimit"
	"github.com/costgate/costgate/limiter"
)

// A check is answered before the request is served and never sees its
// response: the door refuses routes whose policies act when it has ended
// (a concurrency hold it took would never be released), with the reason.
func TestCheckRefusesPoliciesThatEndWithTheResponse(t *testing.T) {
	streams := &limiter.Policy{Name: "streams", Algorithm: limiter.Concurrency, Limit: 5, Key: []string{"ip"}}
	login := loginIP()
	login.RefundStatus = []string{"2xx"}
	for _, p := range []*limiter.Policy{streams, login} {
		rg := newRig(t, rigOpts{routes: []routelimit.Route{{Pattern: "/api/*", Policies: []*limiter.Policy{apiPolicy(), p}}}})
		_, err := check.NewHandler(check.HTTPConfig{Limits: rg.rest, Identity: rg.ids, Gateways: []netip.Prefix{gateway}, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), `policy "`+p.Name+`"`) || !strings.Contains(err.Error(), "never sees the response") {
			t.Errorf("%s: NewHandler = %v, want it refused with the reason", p.Name, err)
		}
	}
}
