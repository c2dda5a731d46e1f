package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/costgate/costgate/internal/loggate"
)

// Logger adapts a *slog.Logger for go-redis's own log lines (redis.SetLogger),
// which during an outage come once per failed dial: it writes at most one
// line a second, at warning level, with the number of lines suppressed
// since the last one. go-redis's logger is process-wide, so installing it is
// the application's call:
//
//	redis.SetLogger(redisstore.NewLogger(logger))
type Logger struct {
	log  *slog.Logger
	gate loggate.Gate
}

// NewLogger returns a Logger writing to l (slog.Default() when nil).
func NewLogger(l *slog.Logger) *Logger {
	if l == nil {
		l = slog.Default()
	}
	return &Logger{log: l}
}

// Printf implements go-redis's logging interface.
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	n, ok := l.gate.Pass(time.Now())
	if !ok {
		return
	}
	l.log.WarnContext(ctx, "go-redis: "+fmt.Sprintf(format, v...), "suppressed", n)
}
