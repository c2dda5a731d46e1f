package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/costgate/costgate/internal/check"
)

// gRPC bounds, the counterpart of the HTTP deadlines: a request is small
// (at most 64 descriptors of 64 entries), a stream is one call, and a
// client that pings too often is cut off.
const (
	GRPCMaxRecvBytes        = 1 << 20
	GRPCMaxConcurrentStream = 256
	GRPCConnectionTimeout   = 10 * time.Second
)

// GRPCServer returns the gRPC server of Envoy's rate-limit service, which
// serves the descriptors of the config in effect (swapped on Reload).
func (s *Server) GRPCServer() *grpc.Server {
	g := grpc.NewServer(
		grpc.MaxRecvMsgSize(GRPCMaxRecvBytes),
		grpc.MaxConcurrentStreams(GRPCMaxConcurrentStream),
		grpc.ConnectionTimeout(GRPCConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: IdleTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(recoverUnary(s.logger)),
		grpc.ForceServerCodecV2(check.Codec()), // a client's non-UTF-8 header is a value, not a failed call
	)
	rlsv3.RegisterRateLimitServiceServer(g, rlsForwarder{s})
	return g
}

// rlsForwarder sends each call to the service of the config in effect.
type rlsForwarder struct{ s *Server }

func (f rlsForwarder) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	rls := f.s.rls.Load()
	if rls == nil {
		return nil, status.Error(codes.FailedPrecondition, "the config in effect maps no envoy.domains")
	}
	return rls.ShouldRateLimit(ctx, req)
}

// recoverUnary turns a panic into Internal: one bad call must not take the
// process down (net/http recovers its handlers; grpc-go does not).
func recoverUnary(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				logger.Error("gRPC handler panicked", "method", info.FullMethod, "panic", v, "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(ctx, req)
	}
}
