package httplimit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Key parts a policy's key may name.
const (
	PartIP       = "ip"
	PartAPIKey   = "api_key"
	PartTenant   = "tenant"
	PartPlan     = "plan"
	PartUsername = "username"
	PartRoute    = "route"
)

// Anonymous is the tenant and plan of a request without an API key.
const Anonymous = "anonymous"

// maxAPIKeyLen bounds the API key header; longer values are not keys.
const maxAPIKeyLen = 256

// ClientIP returns the address a request is limited by, and that address as
// a key: the TCP peer, or, when the peer is a trusted proxy, the right-most
// X-Forwarded-For hop that is not itself a trusted proxy.
//
// Only the peer address cannot be forged. X-Forwarded-For is believed only
// as far as it was written by trusted proxies: each appends the address it
// received the request from, so reading from the right, the first hop that
// is not a trusted proxy is the client as the outermost trusted proxy saw
// it. Everything to its left was written by the client and is ignored. A
// hop that does not parse ends the walk: nothing left of it can be trusted,
// so the last trusted address read stands in for the client. When every hop
// is trusted, the left-most one is the client.
//
// IPv6 clients are grouped by /64, the smallest block one subscriber
// usually holds, so that hopping through one's own /64 gains nothing.
func ClientIP(r *http.Request, trusted []netip.Prefix) netip.Prefix {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	var addr netip.Addr
	if err == nil {
		addr = peer.Addr().Unmap()
	} else if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		addr = a.Unmap() // RemoteAddr without a port (tests, some servers)
	}
	if addr.IsValid() && isTrusted(addr, trusted) {
		addr = walkForwardedFor(r.Header.Values("X-Forwarded-For"), addr, trusted)
	}
	return group(addr)
}

func walkForwardedFor(values []string, peer netip.Addr, trusted []netip.Prefix) netip.Addr {
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[j]))
			if err != nil {
				return client
			}
			client = hop.Unmap()
			if !isTrusted(client, trusted) {
				return client
			}
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func group(a netip.Addr) netip.Prefix {
	switch {
	case !a.IsValid():
		return netip.Prefix{}
	case a.Is4():
		return netip.PrefixFrom(a, 32)
	default:
		p, _ := a.WithZone("").Prefix(64)
		return p
	}
}

// validAPIKey reports whether v can be an API key: 1 to 256 visible ASCII
// characters. Anything else is treated as an unknown key.
func validAPIKey(v string) bool {
	if v == "" || len(v) > maxAPIKeyLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

// NormalizeUsername returns the form a username is limited by: NFKC,
// trimmed, lower-cased, so that "Alice", " alice" and "ａｌｉｃｅ" share one
// limit. It reports false for a name that is empty or not UTF-8.
func NormalizeUsername(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "", false
	}
	s = strings.ToLower(strings.TrimSpace(norm.NFKC.String(s)))
	return s, s != ""
}

// hasher turns identities into store key parts with a keyed hash, so that no
// API key, address or username reaches the store in the clear. Keyed HMAC
// states are pooled: hmac.New costs more than hashing a short value.
type hasher struct{ pool *sync.Pool }

func newHasher(key []byte) hasher {
	key = bytes.Clone(key)
	return hasher{pool: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

func (h hasher) hash(part, value string) string {
	m := h.pool.Get().(hash.Hash)
	m.Reset()
	m.Write([]byte(part))
	m.Write([]byte{0})
	m.Write([]byte(value))
	var sum [sha256.Size]byte
	out := base64.RawURLEncoding.EncodeToString(m.Sum(sum[:0])[:16])
	h.pool.Put(m)
	return out
}
