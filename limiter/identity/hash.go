package identity

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/costgate/costgate/limiter"
)

// hasher turns identities into store key parts with a keyed hash, so that no
// API key, address or username reaches the store in the clear. Keyed HMAC
// states are pooled: hmac.New costs more than hashing a short value.
type hasher struct{ pool *sync.Pool }

func newHasher(key []byte) hasher {
	key = bytes.Clone(key)
	return hasher{pool: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// hash is base64url of the first 128 bits of HMAC(part NUL value): the part
// names the domain, so an address and a username with the same text differ.
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

// Hash is the keyed hash the Resolver applies to identities, for a key of
// the application's own (httplimit's KeyFunc): part names what value is,
// so that equal texts of two parts never share a store key.
func (res *Resolver) Hash(part, value string) string { return res.hash.hash(part, value) }

// NewForStore is New for a Resolver whose keys go to store: a store no
// other process reads (limiter.Local, as memstore is) needs no HashKey, and
// one is drawn at random when cfg has none; a store other processes share
// needs the HashKey they all use, and is refused without it.
func NewForStore(cfg Config, store limiter.Store) (*Resolver, error) {
	if len(cfg.HashKey) == 0 {
		local, ok := store.(limiter.Local)
		if !ok || !local.Local() {
			return nil, fmt.Errorf("identity: %w", &limiter.FieldError{Field: "HashKey",
				Reason: "required: the store is shared with other processes, which must hash identities alike (16+ bytes, the same on every gateway)"})
		}
		cfg.HashKey = make([]byte, 32)
		rand.Read(cfg.HashKey) // never fails (crypto/rand)
	}
	return New(cfg)
}

// addressHashes keeps the hashes of the addresses seen last, so that a
// client's many requests pay for the HMAC of its address once. It is a
// fixed table, one address a slot: a client cycling through addresses only
// replaces entries, and holds no more memory.
type addressHashes struct {
	seed  maphash.Seed
	slots [addressHashSlots]atomic.Pointer[addressHash]
}

const addressHashSlots = 1024

type addressHash struct {
	addr netip.Prefix
	hash string
}

// get returns the hash of addr, made by compute when its slot holds another.
func (t *addressHashes) get(addr netip.Prefix, compute func() string) string {
	if t.seed == (maphash.Seed{}) {
		return compute() // a Resolver not made by New
	}
	slot := &t.slots[maphash.Comparable(t.seed, addr)%addressHashSlots]
	if e := slot.Load(); e != nil && e.addr == addr {
		return e.hash
	}
	h := compute()
	slot.Store(&addressHash{addr: addr, hash: h})
	return h
}
