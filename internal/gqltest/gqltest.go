// Package gqltest sends GraphQL requests to a handler under test and reads
// back what costgate answered: the status, the headers, the errors and
// extensions.cost. Tests of gqllimit, gqlproxy and the server share it.
package gqltest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/costgate/costgate/limiter/gqllimit"
)

// Result is one answer.
type Result struct {
	Status int
	Header http.Header
	Body   string
	Res    struct {
		Data       json.RawMessage `json:"data"`
		Errors     []Error         `json:"errors"`
		Extensions struct {
			Cost *gqllimit.Cost `json:"cost"`
		} `json:"extensions"`
	}
}

// Error is one GraphQL error of an answer.
type Error struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// Code is errors[0].extensions.code, or "".
func (r *Result) Code() string {
	if len(r.Res.Errors) == 0 {
		return ""
	}
	c, _ := r.Res.Errors[0].Extensions["code"].(string)
	return c
}

// Cost is extensions.cost; the test fails when the answer has none.
func (r *Result) Cost(t testing.TB) *gqllimit.Cost {
	t.Helper()
	if r.Res.Extensions.Cost == nil {
		t.Fatalf("status %d: no extensions.cost in %s", r.Status, r.Body)
	}
	return r.Res.Extensions.Cost
}

// Client sends requests to a handler in process.
type Client struct {
	Handler http.Handler
	// Path is the GraphQL endpoint (default /graphql).
	Path string
}

// Post sends a GraphQL request; header may set extra headers.
func (c *Client) Post(t testing.TB, query string, vars map[string]any, header map[string]string) *Result {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return c.Raw(t, "POST", c.path(), body, header)
}

func (c *Client) path() string {
	if c.Path == "" {
		return "/graphql"
	}
	return c.Path
}

// Raw sends any request; the answer must be JSON.
func (c *Client) Raw(t testing.TB, method, target string, body []byte, header map[string]string) *Result {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.Handler.ServeHTTP(w, req)
	r := &Result{Status: w.Code, Header: w.Header(), Body: w.Body.String()}
	if err := json.Unmarshal(w.Body.Bytes(), &r.Res); err != nil {
		t.Fatalf("status %d: body is not JSON: %v\n%s", w.Code, err, w.Body)
	}
	return r
}

// Available reads the caller's bucket through a dry run of the cheapest query.
func (c *Client) Available(t testing.TB, header map[string]string) int64 {
	t.Helper()
	h := map[string]string{gqllimit.HeaderDryRun: "1"}
	for k, v := range header {
		h[k] = v
	}
	r := c.Post(t, `{ __typename }`, nil, h)
	if r.Res.Extensions.Cost == nil || r.Res.Extensions.Cost.ThrottleStatus == nil {
		t.Fatalf("dry run without throttleStatus: %s", r.Body)
	}
	return r.Res.Extensions.Cost.ThrottleStatus.CurrentlyAvailable
}
