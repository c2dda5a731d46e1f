package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/costgate/costgate/internal/admin"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/loggate"
	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
	"github.com/costgate/costgate/limiter/redisstore"
)

// The admin API and console (the docs' operators page): served by
// ServeAdmin on admin.listen alone, never on the main listener; the
// overrides they put live in the state (the store's), read by every check.

// adminParts is the admin side of a Server.
type adminParts struct {
	handler *admin.Handler
	top     *admin.Top
	// random holds the demo config's tokens made up at start, by name:
	// kept across reloads, printed once.
	random map[string]string

	mu     sync.Mutex // guards view
	viewOf struct {
		cfg *config.Config
		st  *state
	}
	view admin.View
}

// newAdmin builds the admin handler of s for cfg (its tokens resolved,
// else read from the process's environment).
func (s *Server) newAdmin(cfg *config.Config) error {
	a := &adminParts{top: admin.NewTop(nil), random: map[string]string{}}
	s.admin = a
	h, err := admin.New(admin.Config{View: s.adminView, Top: a.top, Logger: s.logger, Registerer: s.metrics.registry})
	if err != nil {
		return err
	}
	a.handler = h
	return s.setAdminTokens(cfg)
}

// setAdminTokens gives the handler cfg's tokens, making up those the demo
// config leaves empty (once per process).
func (s *Server) setAdminTokens(cfg *config.Config) error {
	if cfg.Admin.Listen == "" {
		return nil
	}
	if cfg.AdminTokens() == nil && cfg.AdminRandom() == nil {
		if err := cfg.ResolveAdmin(os.Getenv); err != nil {
			return err
		}
	}
	tokens := maps.Clone(cfg.AdminTokens())
	if tokens == nil {
		tokens = map[string]string{}
	}
	for _, name := range cfg.AdminRandom() {
		if s.admin.random[name] == "" {
			var b [24]byte
			rand.Read(b[:]) // never fails (crypto/rand)
			s.admin.random[name] = base64.RawURLEncoding.EncodeToString(b[:])
		}
		tokens[name] = s.admin.random[name]
	}
	return s.admin.handler.SetTokens(tokens)
}

// adminView is what an admin call acts on: the config and state in
// effect now, with a Resolver of that config (made once per config).
func (s *Server) adminView() (admin.View, error) {
	s.mu.Lock()
	cfg, st := s.cfg, s.state
	s.mu.Unlock()
	a := s.admin
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.viewOf.cfg == cfg && a.viewOf.st == st {
		return a.view, nil
	}
	idc := cfg.IdentityConfig(st.hashKey)
	idc.Overrides = st.overrides
	ids, err := identity.New(idc)
	if err != nil {
		return admin.View{}, err
	}
	v := admin.View{Policies: cfg.LimiterPolicies(), Identity: ids, Limiter: st.limiter, Overrides: st.overrides}
	if st.redis != nil {
		v.Store, v.Redis = st.redis, st.redis
	}
	a.viewOf.cfg, a.viewOf.st, a.view = cfg, st, v
	return v, nil
}

// watchAdmin starts the state's overrides, and with Redis, the watch of
// what the other gateways change: their overrides, and resets whose deny
// cache entries and local fallback states this gateway must drop.
func (st *state) watchAdmin(logger *slog.Logger) {
	if st.redis == nil {
		return
	}
	// Read before the first request is served, so that a gateway that
	// restarts applies the overrides from its first request (bounded: a
	// Redis that is down must not hold the start; the watch reads them
	// when it is back).
	ctx, cancel := context.WithTimeout(context.Background(), startProbe)
	if list, err := st.redis.Overrides(ctx); err == nil {
		st.overrides.Set(list)
	}
	cancel()
	var gate loggate.Gate
	st.redis.Watch(func(ev redisstore.AdminEvent) {
		switch ev.Kind {
		case redisstore.AdminResync:
			st.overrides.Set(ev.Overrides)
			st.limiter.ForgetDenials()
		case redisstore.AdminOverrides:
			st.overrides.Set(ev.Overrides)
		case redisstore.AdminReset:
			for _, r := range ev.Resets {
				st.limiter.ForgetLocal(r.Policy, r.Key)
			}
		case redisstore.AdminError:
			if n, ok := gate.Pass(time.Now()); ok {
				logger.Warn("admin: cannot read the overrides and resets of the other gateways; retrying", "err", ev.Err, "suppressed", n)
			}
		}
	})
}

// denials is the limiter option that feeds the admin's top denied.
func (s *Server) denials() limiter.Option { return limiter.WithDenials(s.admin.top.Denied) }

// adminDemoFallback is where the demo config serves the admin listener
// when its own address is taken (another costgate on this machine).
const adminDemoFallback = "127.0.0.1:0"

// ServeAdmin serves the admin API and console on admin.listen (the
// address the server started with), logging "costgate admin listening"
// with it, until stop is called; addr is where it listens. With no
// admin.listen it serves nothing. The demo config takes another loopback
// port when 127.0.0.1:9091 is in use, and prints the token it made up, once.
func (s *Server) ServeAdmin(logger *slog.Logger) (addr string, stop func(), err error) {
	cfg := s.started
	if cfg.Admin.Listen == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil && cfg.IsDemo() && errors.Is(err, syscall.EADDRINUSE) {
		logger.Warn("admin: the demo's admin address is in use; serving the admin API on another loopback port", "wanted", cfg.Admin.Listen)
		ln, err = net.Listen("tcp", adminDemoFallback)
	}
	if err != nil {
		return "", nil, fmt.Errorf("admin.listen: %w", err)
	}
	hs := HTTPServer(s.admin.handler, logger)
	addr = ln.Addr().String()
	logger.Info("costgate admin listening", "addr", addr, "console", "http://"+addr+"/")
	for name, tok := range s.admin.random {
		logger.Warn("admin: "+config.DemoAdminToken+" is not set: this run's admin token, printed once (set the variable to choose one)",
			"token_name", name, "token", tok)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin listener stopped", "err", err)
		}
	}()
	return addr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}, nil
}
