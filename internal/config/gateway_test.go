package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/check"
)

const gatewayPolicies = `
identity:
  trusted_proxies: ["10.0.0.0/8"]
policies:
  api:        {algorithm: token_bucket, limit: 1000, period: 1m, burst: 150, key: [tenant, api_key]}
  login_ip:   {algorithm: sliding_log, limit: 10, period: 5m, key: [ip], on_store_error: deny}
  login_user: {algorithm: sliding_log, limit: 10, period: 5m, key: [username], on_store_error: deny}
graphql: {path: ""}
`

// The envoy section maps onto the check service's trees, field for field.
func TestParseEnvoySection(t *testing.T) {
	c, err := Parse("gw.yaml", []byte(gatewayPolicies+`
grpc_listen: ":8081"
gateway: {username_header: X-Login-User}
envoy:
  domains:
    edge:
      - key: generic_key
        value: api
        descriptors:
          - key: remote_address
            part: ip
            policies: [api]
            descriptors:
              - {key: api_key, part: api_key, policies: [api]}
      - key: generic_key
        value: login
        descriptors:
          - key: remote_address
            part: ip
            policies: [login_ip]
            descriptors:
              - {key: login_user, part: username, policies: [login_ip, login_user]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPCListen != ":8081" || c.Gateway.UsernameHeader != "X-Login-User" {
		t.Errorf("grpc_listen %q, gateway %+v", c.GRPCListen, c.Gateway)
	}
	d := c.EnvoyDomains(c.LimiterPolicies())["edge"]
	leaf := d[1].Descriptors[0].Descriptors[0]
	if len(d) != 2 || d[0].Value != "api" || leaf.Key != "login_user" || leaf.Part != "username" ||
		len(leaf.Policies) != 2 || leaf.Policies[1].Name != "login_user" {
		t.Errorf("EnvoyDomains = %+v", d)
	}
	if err := check.ValidateDomains(c.EnvoyDomains(c.LimiterPolicies()), nil); err != nil {
		t.Error(err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
}

// Every problem of the gateway settings, against its line.
func TestParseEnvoySectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"grpc_listen without domains", "grpc_listen: \":8081\"\n",
			[]string{"gw.yaml:9: grpc_listen: envoy.domains is empty: the rate-limit service would limit nothing"}},
		{"grpc_listen on listen's address", "listen: \":8081\"\ngrpc_listen: \":8081\"\nenvoy: {domains: {edge: [{key: remote_address, part: ip, policies: [login_ip]}]}}\n",
			[]string{`gw.yaml:10: grpc_listen: ":8081" is listen's address too: the gRPC service needs its own`}},
		{"not host:port", "grpc_listen: \"8081\"\nenvoy: {domains: {edge: [{key: remote_address, part: ip, policies: [login_ip]}]}}\n",
			[]string{`gw.yaml:9: grpc_listen: want host:port such as ":8081", got "8081"`}},
		{"tree errors", `envoy:
  domains:
    edge:
      - key: generic_key
        value: login
        descriptors:
          - {key: remote_address, part: address, policies: [login_ip]}
          - {key: login_user, part: username, policies: [login_ip]}
          - {key: api_key, part: api_key, policies: [api, nope]}
      - {key: "", policies: [login_user]}
gateway: {username_header: "X Login"}
`, []string{
			`gw.yaml:15: envoy.domains.edge[0].descriptors[0].part: unknown key part "address" (one of ip, api_key, username, route, header:NAME)`,
			`gw.yaml:16: envoy.domains.edge[0].descriptors[1].policies[0]: policy "login_ip" keys by ip, but no entry on this path has part: ip (remote_address)`,
			`gw.yaml:17: envoy.domains.edge[0].descriptors[2].policies[0]: policy "api" keys by api_key, but no entry on this path has part: ip, which limits an unknown or absent API key`,
			`gw.yaml:17: envoy.domains.edge[0].descriptors[2].policies[1]: unknown policy "nope" (defined: api, login_ip, login_user)`,
			`gw.yaml:18: envoy.domains.edge[1].key: required: the entry's key (remote_address, generic_key, a request_headers descriptor_key)`,
			`gw.yaml:18: envoy.domains.edge[1].policies[0]: policy "login_user" keys by username, but no entry on this path has part: username`,
			`gw.yaml:19: gateway.username_header: want an HTTP header name such as X-Login-User, got "X Login"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.yaml", []byte(gatewayPolicies+tc.yaml))
			if err == nil {
				t.Fatal("parsed")
			}
			got := strings.Split(err.Error(), "\n")
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// grpc_listen needs gateways to answer; domains without grpc_listen serve
// nothing, which is said.
func TestEnvoySectionNeedsGateways(t *testing.T) {
	_, err := Parse("gw.yaml", []byte("policies: {ip: {algorithm: fixed_window, limit: 1, period: 1s, key: [ip]}}\ngraphql: {path: \"\"}\n"+
		"grpc_listen: \":8081\"\nenvoy: {domains: {edge: [{key: remote_address, part: ip, policies: [ip]}]}}\n"))
	if err == nil || !strings.Contains(err.Error(), "grpc_listen: identity.trusted_proxies is empty") {
		t.Errorf("got %v", err)
	}
	c, err := Parse("gw.yaml", []byte(gatewayPolicies+"envoy: {domains: {edge: [{key: remote_address, part: ip, policies: [login_ip]}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); !slices.Contains(w, "envoy.domains: grpc_listen is not set: nothing serves Envoy's rate-limit service") {
		t.Errorf("warnings %v", w)
	}
}
