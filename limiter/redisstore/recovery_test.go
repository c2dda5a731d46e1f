package redisstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/redisstore"
	"github.com/costgate/costgate/limiter/redistest"
)

// recoveryBound is how soon after Redis serves again the first check must
// succeed: about one breaker probe (50ms) and a dial, with room to spare.
const recoveryBound = 200 * time.Millisecond

// Redis killed -9 and started again on its port, a few times: each time the
// first check after Redis serves again succeeds within recoveryBound (plus
// what the machine stalled meanwhile), as measured from the first
// connection the test's own probe got through. Before, go-redis stopped
// dialling once a pool's worth of dials had failed (the pool's warm-up
// dials fail all at once) and tried again once a second: the checks failed
// for up to a second after Redis was back.
func TestFirstCheckAfterRestart(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		store := open(t, redisstore.ClientOptions{URL: "redis://" + srv.Addr()}, newPrefix(t))
		measureRecovery(t, store, srv, []string{"a", "b", "c"}, acceptProbe(srv.Addr()), 3)
	})
	t.Run("sentinel", func(t *testing.T) {
		srv := redistest.StartServer(t)
		sen := redistest.StartSentinel(t, srv, "costgate")
		store := open(t, redisstore.ClientOptions{Sentinel: &redisstore.SentinelOptions{Master: "costgate", Addrs: []string{sen.Addr()}}}, newPrefix(t))
		measureRecovery(t, store, srv, []string{"a", "b", "c"}, acceptProbe(srv.Addr()), 3)
	})
	t.Run("tls", func(t *testing.T) {
		// rediss://: the store's dialer makes the handshake itself.
		srv, port := startTLSServer(t)
		store := open(t, redisstore.ClientOptions{URL: "rediss://127.0.0.1:" + port + "/0?skip_verify=true"}, newPrefix(t))
		if h := store.Health(context.Background()); h.State != redisstore.StateUp {
			t.Fatalf("health over TLS: %+v", h)
		}
		measureRecovery(t, store, srv, []string{"a", "b", "c"}, acceptProbe("127.0.0.1:"+port), 2)
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, redistest.WithConfig("cluster-require-full-coverage", "no"))
		store := open(t, redisstore.ClientOptions{Cluster: c.Addrs()}, newPrefix(t))
		// Keys of the first master, which owns the lowest third of the slots.
		p := recoveryPolicy(t)
		var keys []string
		for i := 0; len(keys) < 3; i++ {
			if k := fmt.Sprintf("key%d", i); redisSlot(store.Keys(p, k)[0]) < 16384/3 {
				keys = append(keys, k)
			}
		}
		victim := c.Nodes()[0]
		// A restarted master refuses writes for its first 2 s (Redis's
		// CLUSTER_WRITABLE_DELAY): the probe is a script on one of its
		// keys, through a client of its own each time (a pool no failure
		// has closed), and two restarts are enough.
		served := func() bool {
			rc := redis.NewClient(&redis.Options{Addr: victim.Addr(), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
			defer rc.Close()
			return rc.Eval(context.Background(), "return 1", []string{store.Keys(p, keys[0])[0]}).Err() == nil
		}
		measureRecovery(t, store, victim, keys, served, 2)
	})
}

func recoveryPolicy(t *testing.T) *limiter.Policy {
	return mustValidate(t, &limiter.Policy{Name: "recovery", Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: time.Second, OnStoreError: limiter.FailDeny})
}

// acceptProbe reports whether a TCP connection to addr is accepted.
func acceptProbe(addr string) func() bool {
	return func() bool {
		c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
}

// measureRecovery runs checks on keys through store while srv is killed
// and started again, cycles times, and holds the first successful check
// after each restart to recoveryBound from the moment back first reported
// true. Each outage lasts 400ms: go-redis's gate closes within its first
// moments, and its probe, once a second, would then come 600ms after Redis.
func measureRecovery(t *testing.T, store *redisstore.Store, srv *redistest.Server, keys []string, back func() bool, cycles int) {
	t.Helper()
	const up, down = 300 * time.Millisecond, 400 * time.Millisecond
	lim := newLimiterOver(t, store)
	l := &load{limiters: []*limiter.Limiter{lim}, policy: recoveryPolicy(t), keys: keys, workers: 2, pause: time.Millisecond, others: schedProbe(srv.Pid)}
	type cycle struct{ killAt, backAt time.Duration }
	var runs []cycle
	stop := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error, 1)
	l.onStart = func() { close(started) }
	go func() {
		defer close(stop)
		<-started
		for range cycles {
			time.Sleep(up)
			c := cycle{killAt: time.Since(l.start)}
			if err := srv.Kill(); err != nil {
				done <- err
				return
			}
			time.Sleep(down)
			restarted := make(chan error, 1)
			go func() { restarted <- srv.Start() }()
			for !back() {
				time.Sleep(time.Millisecond)
			}
			c.backAt = time.Since(l.start)
			if err := <-restarted; err != nil {
				done <- err
				return
			}
			runs = append(runs, c)
		}
		time.Sleep(up)
		done <- nil
	}()
	l.run(stop, time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, c := range runs {
		// The first success after the first failure since the kill.
		failedAt, firstOK := time.Duration(-1), time.Duration(-1)
		for _, s := range l.samples {
			if s.at < c.killAt || s.at > c.backAt+time.Second {
				continue
			}
			if s.err != nil {
				if failedAt < 0 {
					failedAt = s.at
				}
				continue
			}
			if end := s.at + s.took; failedAt >= 0 && s.at > failedAt && (firstOK < 0 || end < firstOK) {
				firstOK = end
			}
		}
		failed := failedAt >= 0
		if !failed {
			t.Errorf("restart %d: no check failed while Redis was down: was it killed?", i+1)
		}
		if firstOK < 0 {
			t.Errorf("restart %d: no check succeeded after Redis was back", i+1)
			continue
		}
		took := firstOK - c.backAt
		worst := l.worstStall(c.backAt, firstOK)
		t.Logf("restart %d: down %s, the first check succeeded %s after Redis served again (the machine stalled %s meanwhile)",
			i+1, (c.backAt - c.killAt).Round(time.Millisecond), took.Round(time.Millisecond), worst.Round(time.Millisecond))
		if took > recoveryBound+worst {
			t.Errorf("restart %d: the first check succeeded %s after Redis served again; want at most %s (%s stall)", i+1, took.Round(time.Millisecond), recoveryBound+worst, worst)
		}
	}
	t.Logf("%s", stats(l.samples))
}

// startTLSServer starts a redis-server that also serves TLS, on the port it
// returns, with a certificate made for the test.
func startTLSServer(t *testing.T) (*redistest.Server, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	srv := redistest.StartServer(t, redistest.WithConfig("tls-port", port), redistest.WithConfig("tls-cert-file", cert),
		redistest.WithConfig("tls-key-file", keyFile), redistest.WithConfig("tls-ca-cert-file", cert), redistest.WithConfig("tls-auth-clients", "no"))
	return srv, port
}
