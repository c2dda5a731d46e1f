// Command costgate is the stand-alone limiting server: the example API and
// REST routes behind costgate's limits (and, with graphql.schema and
// graphql.upstream set, a GraphQL proxy in front of any upstream).
//
//	go run .                                  # :8080, in-memory store, demo config
//	go run . -config costgate.yaml -redis redis://127.0.0.1:6379/0
//	go run . admin top                        # the admin API from a terminal (docs/operators.md)
//
// A flag beats its environment variable (COSTGATE_ADDR, COSTGATE_CONFIG,
// COSTGATE_REDIS_URL), which beats the config file, which beats the default.
// SIGHUP reloads the config file; SIGTERM shuts down gracefully.
//
//	costgate price -schema schema.graphqls [-costs costs.yaml] [-max-cost 1000] [-json] FILE...
//
// prices a client's operations, or its manifest of trusted documents, as
// the server would, and exits 1 naming any that could not run: for a
// client's CI (docs/trusted-documents.md).
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

	"google.golang.org/grpc"

	"github.com/costgate/costgate/internal/admin"
	"github.com/costgate/costgate/internal/config"
	"github.com/costgate/costgate/internal/price"
	"github.com/costgate/costgate/internal/server"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "price": // costgate price: internal/price
			os.Exit(price.Run(os.Args[2:], os.Stdout, os.Stderr))
		case "admin": // costgate admin: internal/admin
			os.Exit(admin.Command(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, hup, nil); err != nil {
		fmt.Fprintln(os.Stderr, "costgate:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the graceful shutdown: in-flight requests get this
// long to finish once SIGTERM arrives.
const shutdownTimeout = 10 * time.Second

// listening is where run serves: HTTP, the gRPC rate-limit service (""
// without grpc_listen) and /metrics ("" without metrics.listen).
type listening struct{ HTTP, GRPC, Metrics string }

// run starts the server and serves until ctx ends, then shuts down
// gracefully. Each value on reload reloads the config file. ready, when not
// nil, receives the addresses it listens on.
func run(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer, reload <-chan os.Signal, ready chan<- listening) error {
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
	path := config.Resolve(*configPath, set["config"], getenv("COSTGATE_CONFIG"))
	load := func() (*config.Config, error) {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		err = cfg.ApplyOverrides(config.Resolve(*addr, set["addr"], getenv("COSTGATE_ADDR")),
			config.Resolve(*redisURL, set["redis"], getenv("COSTGATE_REDIS_URL")))
		if err == nil {
			err = cfg.ResolveAdmin(getenv)
		}
		return cfg, err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(logOut, nil))
	server.RedisLogger(logger)
	srv, err := server.New(cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln = srv.LimitConns(ln, server.HTTP1)
	hs := server.HTTPServer(srv, logger)
	at := listening{HTTP: ln.Addr().String()}
	logger.Info("costgate listening", "addr", at.HTTP, "config", cfg.Source(), "store", srv.StoreName(),
		"max_conns_per_ip", srv.ConnLimit().Max)
	_, stopAdmin, err := srv.ServeAdmin(logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopAdmin()

	grpcErr := make(chan error, 1)
	if cfg.GRPCListen != "" {
		gln, err := net.Listen("tcp", cfg.GRPCListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("grpc_listen: %w", err)
		}
		gln = srv.LimitConns(gln, server.H2C)
		gs := srv.GRPCServer()
		at.GRPC = gln.Addr().String()
		logger.Info("costgate gRPC rate-limit service listening", "addr", at.GRPC)
		go func() { grpcErr <- gs.Serve(gln) }()
		defer stopGRPC(gs, logger)
	}
	if cfg.Metrics.Listen != "" {
		mln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
		ms := server.HTTPServer(srv.MetricsHandler(), logger)
		at.Metrics = mln.Addr().String()
		logger.Info("costgate metrics listening", "addr", at.Metrics)
		go func() { _ = ms.Serve(mln) }()
		defer ms.Close()
	}
	if ready != nil {
		ready <- at
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	for {
		select {
		case err := <-errc:
			return err
		case err := <-grpcErr:
			hs.Close()
			return fmt.Errorf("grpc: %w", err)
		case <-reload:
			next, err := load()
			if err == nil {
				err = srv.Reload(next)
			}
			if err != nil {
				logger.Error("config reload failed; the config in effect stays", "config", cfg.Source(), "err", err.Error())
				continue
			}
			logger.Info("config reloaded", "config", next.Source(), "max_conns_per_ip", srv.ConnLimit().Max)
			continue
		case <-ctx.Done():
		}
		break
	}
	logger.Info("shutting down", "timeout", shutdownTimeout.String())
	srv.SetServing(false)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// stopGRPC lets the calls in flight finish, for at most shutdownTimeout.
func stopGRPC(gs *grpc.Server, logger *slog.Logger) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownTimeout):
		logger.Warn("gRPC calls still in flight at the shutdown timeout; stopping them")
		gs.Stop()
	}
}
