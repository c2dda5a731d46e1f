package browsertest

import "context"

// OpenPage is Open for a page other than the playground (an admin
// console, say): it starts chromium and loads pageURL, waiting for nothing
// else. The Session's Eval, Click, WaitText and Check drive and judge it.
func OpenPage(ctx context.Context, pageURL string, opts Options) (*Session, error) {
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
	return s, nil
}
