package identity

import (
	"hash/maphash"
	"net/netip"
	"testing"
)

// Every address gets its own hash back from the table, however many share
// a slot, and an address seen last in its slot is not hashed again.
func TestAddressHashes(t *testing.T) {
	table := addressHashes{seed: maphash.MakeSeed()}
	computed := 0
	hashOf := func(p netip.Prefix) string {
		return table.get(p, func() string { computed++; return "h:" + p.String() })
	}
	var addrs []netip.Prefix
	for i := range 5000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		addrs = append(addrs, netip.PrefixFrom(a, 32))
	}
	addrs = append(addrs, netip.MustParsePrefix("2001:db8:1:2::/64"), netip.MustParsePrefix("2001:db8:1:3::/64"))
	for range 2 {
		for _, p := range addrs {
			if got, want := hashOf(p), "h:"+p.String(); got != want {
				t.Fatalf("hash of %v = %q, want %q", p, got, want)
			}
		}
	}
	computed = 0
	p := addrs[17]
	hashOf(p)
	hashOf(p)
	if computed > 1 {
		t.Errorf("an address asked for twice in a row was hashed %d times", computed)
	}
}

// A client's requests after the first pay for no HMAC of its address: the
// key of its address is built without allocating for the hash.
func TestAddressHashCached(t *testing.T) {
	res, err := New(Config{HashKey: []byte("identity-test-hash-key")})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParsePrefix("192.0.2.7/32")
	want := res.Hash(PartIP, addr.String())
	hashOnce := func() string {
		id := &Identity{client: Client{Addr: addr}, clientDone: true}
		return res.ipHash(id)
	}
	if got := hashOnce(); got != want {
		t.Fatalf("ipHash = %q, want %q", got, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { hashOnce() }); allocs > 1 {
		t.Errorf("hashing a known address allocates %.0f times, want at most 1 (its Identity)", allocs)
	}
}
