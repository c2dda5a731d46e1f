package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
)

// Session is the playground open in chromium for a test that does more
// than one run: type a query, wait for the page to show something, run,
// look again. Close ends the browser.
type Session struct {
	b      *browser
	ctx    context.Context
	cancel context.CancelFunc
}

// Open starts chromium, loads the GraphiQL page at pageURL and waits for
// its query editor. opts.Timeout bounds the whole session (DefaultTimeout
// when zero).
func Open(ctx context.Context, pageURL string, opts Options) (*Session, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	b, err := startBrowser(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Session{b: b, ctx: ctx, cancel: cancel}
	if err := b.open(ctx, pageURL); err != nil {
		s.Close()
		return nil, err
	}
	if err := b.waitEditor(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close ends the browser.
func (s *Session) Close() {
	s.b.close()
	s.cancel()
}

// TypeQuery replaces the query editor's text with query, as typing would.
func (s *Session) TypeQuery(query string) error { return s.b.typeQuery(s.ctx, query) }

// ClickRun clicks the run button (it does not wait for the result).
func (s *Session) ClickRun() error { return s.b.clickRun(s.ctx) }

// Click clicks the middle of the first element matching the CSS selector
// with the mouse.
func (s *Session) Click(selector string) error { return s.b.click(s.ctx, selector) }

// WaitResult waits until the result pane's text (the whole response)
// satisfies ok, and returns it.
func (s *Session) WaitResult(ok func(string) bool) (string, error) {
	var last string
	err := s.b.waitFor(s.ctx, "the result pane", jsResultText, func(v json.RawMessage) bool {
		return json.Unmarshal(v, &last) == nil && ok(last)
	})
	return last, err
}

// Eval evaluates the JavaScript expression expr in the page (a promise is
// awaited) and decodes its JSON value into out.
func (s *Session) Eval(expr string, out any) error { return s.b.evalAwait(s.ctx, expr, out) }

// WaitText waits until the text of the first element matching the CSS
// selector satisfies ok, and returns that text.
func (s *Session) WaitText(selector string, ok func(string) bool) (string, error) {
	expr := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return el ? el.innerText : null; })()`, selector)
	var last string
	err := s.b.waitFor(s.ctx, selector, expr, func(v json.RawMessage) bool {
		var t *string
		if json.Unmarshal(v, &t) != nil || t == nil {
			return false
		}
		last = *t
		return ok(last)
	})
	if err != nil {
		return last, fmt.Errorf("%w (last text %q)", err, last)
	}
	return last, nil
}

// WaitIdle waits until the page's requests have all finished.
func (s *Session) WaitIdle() error { return s.b.waitIdle(s.ctx) }

// Screenshot is a PNG of the page as it stands.
func (s *Session) Screenshot() ([]byte, error) { return s.b.screenshot(s.ctx) }

// Result is what the page did so far: its requests, console messages,
// exceptions and Content-Security-Policy violations.
func (s *Session) Result() *Result {
	res := &Result{}
	s.b.fill(res)
	_ = s.b.eval(s.ctx, jsCSPViolations, &res.CSPViolations)
	return res
}

// Check fails the test for what RunQuery fails it for: a request to a host
// that is not loopback, a CSP violation, an uncaught exception. It logs the
// requests and the console.
func (s *Session) Check(t interface {
	Helper()
	Logf(string, ...any)
	Errorf(string, ...any)
}) {
	t.Helper()
	res := s.Result()
	for _, r := range res.Requests {
		t.Logf("browser: %s %s (%s)%s", r.Method, short(r.URL), r.Type, failedSuffix(r.Failed))
	}
	for _, c := range res.Console {
		t.Logf("browser console: %s", c)
	}
	if len(res.External) > 0 {
		t.Errorf("browsertest: the page made requests to non-loopback hosts: %q", res.External)
	}
	if len(res.CSPViolations) > 0 {
		t.Errorf("browsertest: Content-Security-Policy violations: %q", res.CSPViolations)
	}
	if len(res.Exceptions) > 0 {
		t.Errorf("browsertest: uncaught exceptions in the page: %q", res.Exceptions)
	}
}
