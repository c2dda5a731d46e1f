package config

import (
	"slices"
	"strings"
	"testing"
)

// A route naming a policy that does not exist is reported first by that
// name and its line, not by what follows from it ("no route has a policy").
func TestUnknownRoutePolicyReportedFirst(t *testing.T) {
	yaml := "policies:\n  api: {algorithm: token_bucket, limit: 10, period: 1m, key: [ip]}\nroutes:\n  - {match: \"/api/*\", policies: [apii]}\ngraphql: {path: \"\"}\n"
	_, err := Parse("gw.yaml", []byte(yaml))
	if err == nil {
		t.Fatal("Parse succeeded, want the unknown policy refused")
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	if want := `gw.yaml:4: routes[0].policies[0]: unknown policy "apii" (defined: api)`; first != want {
		t.Errorf("first line %q, want %q\nwhole error:\n%s", first, want, err)
	}
	if strings.Contains(err.Error(), "no route has a policy") {
		t.Errorf("the error repeats the consequence of the unknown name:\n%s", err)
	}
}

// A plan an API key uses but plans does not list is warned about at the
// key's own line, without naming the key (a secret).
func TestMissingPlanWarningNamesTheLine(t *testing.T) {
	yaml := "identity:\n  api_keys:\n    secret-one: {tenant: a, plan: free}\n    secret-two: {tenant: b, plan: gold}\nplans: {free: 1}\n" + noGraphQL
	c, err := Parse("gw.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`gw.yaml:4: identity.api_keys[#2].plan: plan "gold" is not in plans: multiplier 1`}
	if got := c.Warnings(); !slices.Equal(got, want) {
		t.Errorf("Warnings() = %q, want %q", got, want)
	}
}
