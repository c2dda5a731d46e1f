// Package browsertest drives the GraphiQL playground in a real headless
// chromium, for tests: it loads the page, types a query into GraphiQL's query
// editor, clicks the run button and returns the text of the result pane.
//
// Chromium is Debian's (apt-get install -y chromium), driven over the Chrome
// DevTools Protocol through --remote-debugging-pipe (no websocket, no port,
// no dependency). The browser gets a closed network: every host name resolves
// to nothing except 127.0.0.1 and localhost, and every connection that is not
// to a loopback address goes to a proxy at 127.0.0.1:1, which refuses it. On
// top of that every request the page makes is recorded (CDP Network events),
// and RunQuery fails the test when one went to a host that is not loopback.
package browsertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Chromium is the browser RunQuery and Run start. The CHROMIUM environment
// variable overrides it.
var Chromium = "/usr/bin/chromium"

// InstallHint is how to get the browser, for error messages.
const InstallHint = "apt-get install -y chromium"

// ErrNoChromium is returned (wrapped) by Run when the browser is missing.
var ErrNoChromium = errors.New("chromium is not installed (" + InstallHint + ")")

// DefaultTimeout bounds a whole Run (browser start to browser exit) when the
// context has no earlier deadline.
const DefaultTimeout = 60 * time.Second

// Options tunes Run.
type Options struct {
	// Timeout bounds the run; DefaultTimeout when zero.
	Timeout time.Duration
	// Screenshot asks for a PNG of the page once the result is shown.
	Screenshot bool
}

// Request is one request the page made, as chromium's Network domain saw it.
type Request struct {
	Method string
	URL    string
	Type   string // Document, Script, Stylesheet, Fetch, WebSocket, …
	Failed string // the network error, when it failed
}

// Result is what Run saw.
type Result struct {
	// Text is the result pane's text: GraphiQL's pretty-printed JSON of the
	// whole response (data, errors and extensions).
	Text string
	// Requests is every request the page made, in order.
	Requests []Request
	// External lists the requests (URLs) that went to, or were meant for, a
	// host that is not a loopback address. RunQuery fails when it is not
	// empty.
	External []string
	// CSPViolations lists the page's Content-Security-Policy violations
	// ("directive blocked-url").
	CSPViolations []string
	// Exceptions lists the page's uncaught JavaScript exceptions.
	Exceptions []string
	// Console lists the page's console messages ("level: text").
	Console []string
	// Screenshot is a PNG of the page, when Options.Screenshot was set.
	Screenshot []byte
}

// RunQuery loads the GraphiQL page at pageURL (use a 127.0.0.1 URL, such as
// an httptest server's: the browser reaches nothing else), puts query in the
// query editor, runs it and returns the result pane's text. It fails the test
// when chromium is missing (with the install command: it never skips), when
// the page made any request to a host that is not loopback, broke its
// Content-Security-Policy or threw an uncaught exception, or when nothing
// showed up within DefaultTimeout. Chromium is started for the call and
// killed before it returns.
func RunQuery(t testing.TB, pageURL, query string) string {
	t.Helper()
	res, err := Run(context.Background(), pageURL, query, Options{})
	if res != nil {
		for _, r := range res.Requests {
			t.Logf("browser: %s %s (%s)%s", r.Method, short(r.URL), r.Type, failedSuffix(r.Failed))
		}
		for _, c := range res.Console {
			t.Logf("browser console: %s", c)
		}
	}
	if err != nil {
		t.Fatalf("browsertest: %v", err)
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
	return res.Text
}

func short(u string) string {
	if len(u) > 100 {
		return u[:100] + "…"
	}
	return u
}

func failedSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " failed: " + s
}

// Run is RunQuery without a testing.TB: it returns what it saw, and an
// error when it could not get a result. The Result is not nil when the page
// was loaded, even with an error. With an empty query it only loads the
// page (any page) and waits for its requests to settle: Result.Requests
// then tells what the page asked for.
func Run(ctx context.Context, pageURL, query string, opts Options) (*Result, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	b, err := startBrowser(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()

	res := &Result{}
	err = b.runQuery(ctx, pageURL, query, opts, res)
	b.fill(res)
	if err != nil {
		if logs := b.stderr.String(); logs != "" && ctx.Err() != nil {
			err = fmt.Errorf("%w\nchromium stderr (tail):\n%s", err, logs)
		}
		return res, err
	}
	return res, nil
}

// Eval loads pageURL, evaluates the JavaScript expression expr in it (a
// promise is awaited) and decodes its JSON value into out. It is for pages
// other than the playground: a page of one origin calling another, say.
func Eval(ctx context.Context, pageURL, expr string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	b, err := startBrowser(ctx)
	if err != nil {
		return err
	}
	defer b.close()
	res := &Result{}
	if err := b.runQuery(ctx, pageURL, "", Options{}, res); err != nil {
		return err
	}
	return b.evalAwait(ctx, expr, out)
}

// browser is one chromium process and the page session the run uses.
type browser struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	profile string
	stderr  *tailBuffer
	c       *cdp
	session string

	mu         sync.Mutex
	requests   []Request
	byID       map[string]int  // requestId -> index in requests
	finished   map[string]bool // requestIds that finished or failed
	console    []string
	exceptions []string
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return Chromium
}

func startBrowser(ctx context.Context) (*browser, error) {
	bin := chromiumPath()
	if _, err := exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoChromium, bin, err)
	}
	profile, err := os.MkdirTemp("", "browsertest-profile-")
	if err != nil {
		return nil, err
	}
	// Chromium reads commands from fd 3 and writes replies and events to fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(profile)
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		os.RemoveAll(profile)
		return nil, err
	}
	b := &browser{
		profile:  profile,
		stderr:   &tailBuffer{max: 16 << 10},
		exited:   make(chan struct{}),
		byID:     map[string]int{},
		finished: map[string]bool{},
	}
	b.cmd = exec.Command(bin,
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-extensions",
		"--disable-default-apps",
		"--disable-domain-reliability",
		"--disable-client-side-phishing-detection",
		"--disable-breakpad",
		"--disable-dev-shm-usage",
		"--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
		"--metrics-recording-only",
		"--no-pings",
		"--mute-audio",
		"--password-store=basic",
		"--use-mock-keychain",
		// The closed network: no name resolves but the loopback ones, and
		// everything not sent straight to loopback goes to a proxy that
		// refuses every connection (nothing listens on port 1).
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
		"--proxy-server=127.0.0.1:1",
		"--proxy-bypass-list=127.0.0.1;localhost;[::1]",
		"--window-size=1280,900",
		"--user-data-dir="+profile,
		"--remote-debugging-pipe",
		"about:blank",
	)
	b.cmd.ExtraFiles = []*os.File{cmdR, evW}
	b.cmd.Stdout = b.stderr
	b.cmd.Stderr = b.stderr
	setProcAttrs(b.cmd)
	b.cmd.WaitDelay = 2 * time.Second // a helper holding stderr open must not hang Wait
	if err := b.cmd.Start(); err != nil {
		cmdR.Close()
		cmdW.Close()
		evR.Close()
		evW.Close()
		os.RemoveAll(profile)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	cmdR.Close()
	evW.Close()
	go func() {
		_ = b.cmd.Wait()
		evR.Close()
		close(b.exited)
	}()
	b.c = newCDP(cmdW, evR, b.event)

	if err := b.c.call(ctx, "", "Browser.getVersion", nil, nil); err != nil {
		b.close()
		return nil, fmt.Errorf("chromium did not answer on its debugging pipe: %w\n%s", err, b.stderr.String())
	}
	return b, nil
}

// close ends the browser: politely (Browser.close), then by SIGKILL to its
// process group; it removes the profile.
func (b *browser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = b.c.call(ctx, "", "Browser.close", nil, nil)
	select {
	case <-b.exited:
	case <-ctx.Done():
	}
	// Whatever it left behind (the main process, when it did not exit, and
	// any helper in its group).
	killTree(b.cmd)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
	}
	b.c.w.Close()
	os.RemoveAll(b.profile)
}

func (b *browser) event(m cdpMessage) {
	switch m.Method {
	case "Network.requestWillBeSent":
		var p struct {
			RequestID string `json:"requestId"`
			Type      string `json:"type"`
			Request   struct {
				URL    string `json:"url"`
				Method string `json:"method"`
			} `json:"request"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			if i, ok := b.byID[p.RequestID]; ok && b.requests[i].URL == p.Request.URL {
				b.mu.Unlock()
				return // the same request again (e.g. its redirect): already seen
			}
			b.byID[p.RequestID] = len(b.requests)
			b.requests = append(b.requests, Request{Method: p.Request.Method, URL: p.Request.URL, Type: p.Type})
			b.mu.Unlock()
		}
	case "Network.webSocketCreated":
		var p struct {
			RequestID string `json:"requestId"`
			URL       string `json:"url"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			b.byID[p.RequestID] = len(b.requests)
			b.requests = append(b.requests, Request{Method: "GET", URL: p.URL, Type: "WebSocket"})
			b.mu.Unlock()
		}
	case "Network.loadingFinished":
		var p struct {
			RequestID string `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			b.finished[p.RequestID] = true
			b.mu.Unlock()
		}
	case "Network.loadingFailed":
		var p struct {
			RequestID string `json:"requestId"`
			ErrorText string `json:"errorText"`
			Blocked   string `json:"blockedReason"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			b.finished[p.RequestID] = true
			if i, ok := b.byID[p.RequestID]; ok {
				b.requests[i].Failed = strings.TrimSpace(p.ErrorText + " " + p.Blocked)
			}
			b.mu.Unlock()
		}
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			var parts []string
			for _, a := range p.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			b.mu.Lock()
			b.console = append(b.console, p.Type+": "+strings.Join(parts, " "))
			b.mu.Unlock()
		}
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			b.console = append(b.console, p.Entry.Level+" ("+p.Entry.Source+"): "+p.Entry.Text+" "+p.Entry.URL)
			b.mu.Unlock()
		}
	case "Runtime.exceptionThrown":
		var p struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.mu.Lock()
			b.exceptions = append(b.exceptions, strings.TrimSpace(p.Details.Text+" "+p.Details.Exception.Description))
			b.mu.Unlock()
		}
	}
}

// fill copies what the event handler recorded into res.
func (b *browser) fill(res *Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res.Requests = append([]Request(nil), b.requests...)
	res.Console = append([]string(nil), b.console...)
	res.Exceptions = append([]string(nil), b.exceptions...)
	res.External = nil
	for _, r := range b.requests {
		if !isLocal(r.URL) {
			res.External = append(res.External, r.URL)
		}
	}
}

// isLocal reports whether a request for u stays on this machine: a data:,
// blob: or about: URL, or one whose host is a loopback address or localhost.
func isLocal(u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch pu.Scheme {
	case "data", "blob", "about":
		return true
	case "http", "https", "ws", "wss":
		h := pu.Hostname()
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// The page-side helpers, run with Runtime.evaluate.
const (
	// Records CSP violations from the first script on.
	jsCSPWatch = `window.__browsertestCSP = [];
document.addEventListener('securitypolicyviolation', e =>
  window.__browsertestCSP.push(e.violatedDirective + ' ' + e.blockedURI));`
	jsLoaded      = `location.href !== 'about:blank' && document.readyState === 'complete'`
	jsEditorReady = `(() => {
  const cm = document.querySelector('.graphiql-query-editor .CodeMirror');
  return !!(cm && cm.CodeMirror && document.querySelector('.graphiql-execute-button'));
})()`
	jsFocusEditor = `(() => {
  const cm = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
  cm.focus();
  cm.execCommand('selectAll');
  return cm.hasFocus();
})()`
	jsEditorValue = `document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.getValue()`
	// jsCenterOf is a format: %q takes a CSS selector.
	jsCenterOf = `(() => {
  const el = document.querySelector(%q);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  return {x: r.x + r.width / 2, y: r.y + r.height / 2};
})()`
	jsResultText = `(() => {
  const el = document.querySelector('.graphiql-response .CodeMirror');
  if (!el) return '';
  return el.CodeMirror ? el.CodeMirror.getValue() : el.innerText;
})()`
	jsCSPViolations = `window.__browsertestCSP || []`
)

func (b *browser) runQuery(ctx context.Context, pageURL, query string, opts Options, res *Result) error {
	if err := b.open(ctx, pageURL); err != nil {
		return err
	}
	if query == "" {
		return b.waitIdle(ctx)
	}
	if err := b.waitEditor(ctx); err != nil {
		return err
	}
	if err := b.typeQuery(ctx, query); err != nil {
		return err
	}
	if err := b.clickRun(ctx); err != nil {
		return err
	}
	if err := b.waitFor(ctx, "the result pane", jsResultText, func(v json.RawMessage) bool {
		var s string
		return json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != ""
	}); err != nil {
		return err
	}
	if err := b.eval(ctx, jsResultText, &res.Text); err != nil {
		return err
	}
	if err := b.eval(ctx, jsCSPViolations, &res.CSPViolations); err != nil {
		return err
	}
	if opts.Screenshot {
		png, err := b.screenshot(ctx)
		if err != nil {
			return err
		}
		res.Screenshot = png
	}
	return nil
}

// open creates a tab, attaches to it and loads pageURL.
func (b *browser) open(ctx context.Context, pageURL string) error {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return err
	}
	b.session = att.SessionID
	for _, m := range []string{"Page.enable", "Network.enable", "Runtime.enable", "Log.enable"} {
		if err := b.call(ctx, m, nil, nil); err != nil {
			return err
		}
	}
	if err := b.call(ctx, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": jsCSPWatch}, nil); err != nil {
		return err
	}

	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": pageURL}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("loading %s: %s", pageURL, nav.ErrorText)
	}
	return b.waitFor(ctx, pageURL+" to load", jsLoaded, func(v json.RawMessage) bool {
		return string(v) == "true"
	})
}

func (b *browser) waitEditor(ctx context.Context) error {
	return b.waitFor(ctx, "GraphiQL's query editor and run button", jsEditorReady, func(v json.RawMessage) bool {
		return string(v) == "true"
	})
}

// typeQuery replaces the query editor's text with query: it focuses the
// editor, selects what is there and inserts the text as the keyboard would
// (Input.insertText: no key events, so no auto-closed brackets).
func (b *browser) typeQuery(ctx context.Context, query string) error {
	var focused bool
	if err := b.eval(ctx, jsFocusEditor, &focused); err != nil {
		return err
	}
	if err := b.call(ctx, "Input.insertText", map[string]any{"text": query}, nil); err != nil {
		return err
	}
	var typed string
	if err := b.eval(ctx, jsEditorValue, &typed); err != nil {
		return err
	}
	if typed != query {
		return fmt.Errorf("the query editor holds %q after typing %q (focused: %v)", typed, query, focused)
	}
	return nil
}

// clickRun clicks GraphiQL's run button with the mouse.
func (b *browser) clickRun(ctx context.Context) error {
	return b.click(ctx, ".graphiql-execute-button")
}

// click clicks the middle of the first element matching the CSS selector
// with the mouse.
func (b *browser) click(ctx context.Context, selector string) error {
	var pt *struct{ X, Y float64 }
	if err := b.eval(ctx, fmt.Sprintf(jsCenterOf, selector), &pt); err != nil {
		return err
	}
	if pt == nil {
		return fmt.Errorf("nothing in the page matches %s", selector)
	}
	for _, ev := range []map[string]any{
		{"type": "mouseMoved", "x": pt.X, "y": pt.Y},
		{"type": "mousePressed", "x": pt.X, "y": pt.Y, "button": "left", "buttons": 1, "clickCount": 1},
		{"type": "mouseReleased", "x": pt.X, "y": pt.Y, "button": "left", "buttons": 0, "clickCount": 1},
	} {
		if err := b.call(ctx, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return err
		}
	}
	return nil
}

func (b *browser) screenshot(ctx context.Context) ([]byte, error) {
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}

// waitIdle waits until every request the page made (but websockets) has
// finished or failed, and no new one started for a moment.
func (b *browser) waitIdle(ctx context.Context) error {
	const quiet = 300 * time.Millisecond
	idleSince := time.Time{}
	for {
		b.mu.Lock()
		busy := false
		for id, i := range b.byID {
			if b.requests[i].Type != "WebSocket" && !b.finished[id] {
				busy = true
			}
		}
		b.mu.Unlock()
		switch {
		case busy:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) >= quiet:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the page's requests to finish: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *browser) call(ctx context.Context, method string, params, result any) error {
	return b.c.call(ctx, b.session, method, params, result)
}

// eval evaluates expr in the page and decodes its (JSON) value into out.
func (b *browser) eval(ctx context.Context, expr string, out any) error {
	return b.evaluate(ctx, expr, false, out)
}

// evalAwait is eval for an expression whose value is a promise.
func (b *browser) evalAwait(ctx context.Context, expr string, out any) error {
	return b.evaluate(ctx, expr, true, out)
}

func (b *browser) evaluate(ctx context.Context, expr string, await bool, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": await}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// waitFor polls expr until ok accepts its value.
func (b *browser) waitFor(ctx context.Context, what, expr string, ok func(json.RawMessage) bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var v json.RawMessage
		if err := b.eval(ctx, expr, &v); err != nil && ctx.Err() == nil {
			return err
		}
		if ok(v) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
