package redisstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/costgate/costgate/internal/syncbuf"
	"github.com/costgate/costgate/limiter/redisstore"
)

// go-redis logs a line per failed dial; the adapter lets one a second
// through, with the count of the others.
func TestLoggerLimitsGoRedisLines(t *testing.T) {
	var buf syncbuf.Buffer
	l := redisstore.NewLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 1000 {
		l.Printf(context.Background(), "dial tcp %s: connection refused", "127.0.0.1:1")
	}
	lines := buf.Lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[0], "suppressed=0") {
		t.Fatalf("lines %q, want one", lines)
	}
}
