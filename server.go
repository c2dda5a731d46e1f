// Command costgate is the stand-alone limiting server: the example API and
// REST routes behind costgate's limits (and, with graphql.schema and
// graphql.upstream set, a GraphQL proxy in front of any upstream).
//
//	go run .                                  # :8080, in-memory store, demo config
//	go run . -config costgate.yaml -redis redis://127.0.0.1:6379/0
//
// A flag beats its environment variable (COSTGATE_ADDR, COSTGATE_CONFIG,
// COSTGATE_REDIS_URL), which beats the config file, which beats the default.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "costgate:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the graceful shutdown: in-flight requests get this
// long to finish once SIGTERM arrives.
const shutdownTimeout = 10 * time.Second

// run starts the server and serves until ctx ends, then shuts down
// gracefully. ready, when not nil, receives the address it listens on.
func run(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("costgate", flag.ContinueOnError)
	fs.SetOutput(logOut)
	addr := fs.String("addr", "", "listen address (env COSTGATE_ADDR; default :8080)")
	configPath := fs.String("config", "", "YAML config file (env COSTGATE_CONFIG; default: the built-in demo config)")
	redisURL := fs.String("redis", "", "Redis URL, e.g. redis://127.0.0.1:6379/0; replaces the config's store (env COSTGATE_REDIS_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg, err := LoadConfig(resolve(*configPath, set["config"], getenv("COSTGATE_CONFIG")))
	if err != nil {
		return err
	}
	if err := cfg.ApplyOverrides(resolve(*addr, set["addr"], getenv("COSTGATE_ADDR")), resolve(*redisURL, set["redis"], getenv("COSTGATE_REDIS_URL"))); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(logOut, nil))
	a, err := newApp(cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("costgate listening", "addr", ln.Addr().String(), "config", cfg.Source(), "store", a.storeName)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", shutdownTimeout.String())
	a.serving.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
