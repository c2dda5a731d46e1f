package identity

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/costgate/costgate/internal/peer"
)

// Client is the address a request is limited by. Addr is the client's
// address grouped to a prefix (/32 for IPv4, /64 for IPv6). When the
// right-most untrusted forwarded hop does not parse as an address, Addr is
// invalid and Text holds that hop: the client is then known by its text
// (hashed like any other identity), never by the proxy's own address.
type Client struct {
	Addr netip.Prefix
	Text string
}

// String is the address, or the text a hop was known by (quoted).
func (c Client) String() string {
	if c.Addr.IsValid() {
		return c.Addr.String()
	}
	return `"` + c.Text + `"`
}

// maxHops bounds the forwarded hops read for one request: a header of
// thousands of hops costs no more than this many parses.
const maxHops = 64

// maxHopText bounds the text a client is known by when its hop does not parse.
const maxHopText = 256

// ClientIP returns the address a request is limited by: the TCP peer, or,
// when the peer is a trusted proxy, the right-most forwarded hop that is not
// itself a trusted proxy.
//
// Only the peer address cannot be forged. Forwarded hops are believed only
// as far as trusted proxies wrote them: each appends the address it received
// the request from, so reading from the right, the first hop that is not a
// trusted proxy is the client as the outermost trusted proxy saw it.
// Everything left of it was written by the client and is ignored.
//
// The hops come from X-Forwarded-For when the request has one, else from the
// for= parameters of RFC 7239 Forwarded. A trusted proxy must therefore set
// X-Forwarded-For (nginx, Traefik, Envoy, HAProxy and cloud balancers do);
// one that writes only Forwarded must remove any X-Forwarded-For the client
// sent, or the client's own header would be read.
//
// A hop may carry a port ("198.51.100.7:4444", "[2001:db8::1]:4444"),
// brackets, or an IPv6 zone; all are dropped. A hop that still does not parse
// ("unknown", an obfuscated RFC 7239 identifier, garbage) ends the walk and
// identifies the client by its text: one client behind a proxy can never put
// every client into the proxy's own bucket. When every hop is trusted, the
// left-most one is the client. At most 64 hops are read.
//
// IPv6 clients are grouped by /64, the smallest block one subscriber usually
// holds, so that hopping through one's own /64 gains nothing.
func ClientIP(r *http.Request, trusted []netip.Prefix) Client {
	addr, ok := peer.ParseHop(r.RemoteAddr)
	if !ok || !peer.Contains(addr, trusted) {
		return Client{Addr: group(addr)}
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		return walk(xff, addr, trusted, nextXFFHop)
	}
	if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 {
		return walk(fwd, addr, trusted, nextForwardedHop)
	}
	return Client{Addr: group(addr)}
}

// walk reads hops right to left across the header lines.
func walk(lines []string, tcpPeer netip.Addr, trusted []netip.Prefix, next func(string) (string, string, bool)) Client {
	client, hops := tcpPeer, 0
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for {
			hop, left, ok := next(rest)
			if !ok {
				break
			}
			rest = left
			if hop == "" {
				continue // an empty list element
			}
			if hops++; hops > maxHops {
				return Client{Addr: group(client)}
			}
			a, ok := peer.ParseHop(hop)
			if !ok {
				return Client{Text: truncateText(hop)}
			}
			client = a
			if !peer.Contains(client, trusted) {
				return Client{Addr: group(client)}
			}
		}
	}
	return Client{Addr: group(client)}
}

// nextXFFHop splits the right-most element off an X-Forwarded-For value.
func nextXFFHop(s string) (hop, rest string, ok bool) {
	if strings.TrimSpace(s) == "" {
		return "", "", false
	}
	i := strings.LastIndexByte(s, ',')
	if i < 0 {
		return strings.TrimSpace(s), "", true
	}
	return strings.TrimSpace(s[i+1:]), s[:i], true
}

// nextForwardedHop splits the right-most element off a Forwarded value and
// returns its for= parameter ("" when it has none). Quoted strings may hold
// commas and semicolons (for="[2001:db8::1]:4711").
func nextForwardedHop(s string) (hop, rest string, ok bool) {
	if strings.TrimSpace(s) == "" {
		return "", "", false
	}
	// Find the last comma outside quotes.
	cut, inQuote := -1, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '\\':
			if inQuote {
				i++
			}
		case ',':
			if !inQuote {
				cut = i
			}
		}
	}
	elem := s
	if cut >= 0 {
		elem, rest = s[cut+1:], s[:cut]
	}
	for _, pair := range splitParams(elem) {
		name, value, found := strings.Cut(pair, "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = strings.ReplaceAll(value[1:len(value)-1], `\`, "")
		}
		if value == "" {
			value = `""`
		}
		return value, rest, true
	}
	return "", rest, true
}

// splitParams splits a Forwarded element at semicolons outside quotes.
func splitParams(s string) []string {
	var out []string
	start, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '\\':
			if inQuote {
				i++
			}
		case ';':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func group(a netip.Addr) netip.Prefix {
	switch {
	case !a.IsValid():
		return netip.Prefix{}
	case a.Is4():
		return netip.PrefixFrom(a, 32)
	default:
		p, _ := a.Prefix(64)
		return p
	}
}

func truncateText(s string) string {
	if len(s) > maxHopText {
		return s[:maxHopText]
	}
	return s
}
