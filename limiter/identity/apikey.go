package identity

import "context"

// APIKey is what an API key stands for.
type APIKey struct {
	Tenant string
	Plan   string
}

// Lookup finds what an API key stands for: the config's table is one
// implementation ([Table]); a service's own key database is another. ok is
// false for a key it does not know; an error means it could not tell (the
// doors then answer 503 and charge nothing to the key).
type Lookup interface {
	LookupAPIKey(ctx context.Context, key string) (k APIKey, ok bool, err error)
}

// Table is a fixed API-key table.
type Table map[string]APIKey

var _ Lookup = Table(nil)

// LookupAPIKey implements Lookup.
func (t Table) LookupAPIKey(_ context.Context, key string) (APIKey, bool, error) {
	k, ok := t[key]
	return k, ok, nil
}

// maxAPIKeyLen bounds the API key header; longer values are not keys.
const maxAPIKeyLen = 256

// validAPIKey reports whether v can be an API key: 1 to 256 visible ASCII
// characters. Anything else is an unknown key, never looked up.
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
