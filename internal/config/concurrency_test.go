package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/costgate/costgate/limiter"
)

// Concurrency policies and refund_status, as a file writes them: 404 and
// "404" are one status, a lease is a duration, and every refusal names its
// line and says why.
func TestConcurrencyAndRefundStatus(t *testing.T) {
	c, err := Parse("ok.yaml", []byte(`graphql: {path: ""}
policies:
  streams: {algorithm: concurrency, limit: 5, lease: 10s, key: [api_key]}
  login:   {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], refund_status: [2xx, 404, "409"]}
routes:
  - {match: "POST /login", policies: [login]}
  - {match: "/*",          policies: [streams]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ps := c.LimiterPolicies()
	if p := ps["streams"]; p.Algorithm != limiter.Concurrency || p.Limit != 5 || p.Lease != 10*time.Second || p.Period != 0 {
		t.Errorf("streams = %+v", *p)
	}
	if got, want := ps["login"].RefundStatus, []string{"2xx", "404", "409"}; !reflect.DeepEqual(got, want) {
		t.Errorf("refund_status = %q, want %q", got, want)
	}

	door := "  api: {algorithm: token_bucket, limit: 100, period: 1m, key: [ip]}\n" +
		"  streams: {algorithm: concurrency, limit: 5, key: [ip]}\n" +
		"  login: {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], refund_status: [2xx]}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"a period", "policies:\n  s: {algorithm: concurrency, limit: 5, period: 1m, key: [ip]}\n",
			"bad.yaml:2: policies.s.period: concurrency has no period"},
		{"a short lease", "policies:\n  s: {algorithm: concurrency, limit: 5, lease: 100ms, key: [ip]}\n",
			"bad.yaml:2: policies.s.lease: must be at least 1s"},
		{"a lease on a rate", "policies:\n  s: {algorithm: token_bucket, limit: 5, period: 1s, lease: 10s, key: [ip]}\n",
			"bad.yaml:2: policies.s.lease: only concurrency takes a lease"},
		{"a bad status", "policies:\n  s:\n    algorithm: sliding_log\n    limit: 5\n    period: 1m\n    key: [ip]\n    refund_status:\n      - 2xx\n      - 1xx\n",
			"bad.yaml:9: policies.s.refund_status[1]: want a status class such as 2xx"},
		{"a status of the wrong type", "policies:\n  s: {algorithm: sliding_log, limit: 5, period: 1m, key: [ip], refund_status: [[2xx]]}\n",
			"policies.s.refund_status[0]: want a status class such as 2xx or a code such as 404, got a list"},
		{"refund_status on the GraphQL policy", "policies:\n  graphql: {algorithm: token_bucket, limit: 100, period: 1s, key: [ip], refund_status: [2xx]}\n",
			`graphql.policy: policy "graphql" has refund_status`},
		{"concurrency behind the check door", "graphql: {path: \"\"}\nidentity: {trusted_proxies: [10.0.0.0/8]}\npolicies:\n" + door +
			"routes:\n  - {match: \"/api/*\", policies: [api, streams]}\n",
			`bad.yaml:8: routes[0].policies[1]: policy "streams" is a concurrency policy, whose hold is released when the response has ended, and the gateway door is served (identity.trusted_proxies is set`},
		{"refund_status behind the check door", "graphql: {path: \"\"}\nidentity: {trusted_proxies: [10.0.0.0/8]}\npolicies:\n" + door +
			"routes:\n  - {match: \"POST /login\", policies: [login]}\n",
			`routes[0].policies[0]: policy "login" has refund_status`},
		{"concurrency with Envoy's service", "graphql: {path: \"\"}\ngrpc_listen: \"127.0.0.1:0\"\nidentity: {trusted_proxies: [10.0.0.0/8]}\npolicies:\n" + door +
			"envoy:\n  domains:\n    edge:\n      - {key: remote_address, part: ip, policies: [streams]}\n",
			`envoy.domains.edge[0].policies[0]: policy "streams" is a concurrency policy`},
	} {
		_, err := Parse("bad.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error\n%v\nwant it to contain\n%s", tc.name, err, tc.want)
		}
	}
}

// gateway.check: false turns the forward-auth door off, so a costgate that
// trusts its load balancer's X-Forwarded-For may limit its own routes with
// policies that need the response's end.
func TestEndingPoliciesWithTheCheckDoorOff(t *testing.T) {
	c, err := Parse("ok.yaml", []byte(`graphql: {path: ""}
identity: {trusted_proxies: [10.0.0.0/8]}
gateway: {check: false}
policies:
  streams: {algorithm: concurrency, limit: 5, key: [ip]}
  login: {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], refund_status: [2xx]}
routes:
  - {match: "POST /login", policies: [login]}
  - {match: "/api/*", policies: [streams]}
`))
	if err != nil {
		t.Fatalf("refused with the door off: %v", err)
	}
	if c.ServesCheck() {
		t.Error("ServesCheck with gateway.check: false")
	}
}
