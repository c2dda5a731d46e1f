package identity_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/costgate/costgate/limiter"
	"github.com/costgate/costgate/limiter/identity"
)

// Who pays for a request: an API key's tenant and plan, or, without a key,
// the client address behind a trusted proxy.
func ExampleResolver_Resolve() {
	ids, err := identity.New(identity.Config{
		HashKey:        []byte("a secret every gateway shares"),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		APIKeys:        identity.Table{"key-123": {Tenant: "acme", Plan: "pro"}},
	})
	if err != nil {
		panic(err)
	}
	for _, h := range []map[string]string{
		{"X-API-Key": "key-123"},
		{"X-Forwarded-For": "198.51.100.7:4444"},
		{"X-API-Key": "guessed"},
	} {
		r := httptest.NewRequest("GET", "/api/products", nil)
		r.RemoteAddr = "10.0.0.2:443" // the proxy
		for k, v := range h {
			r.Header.Set(k, v)
		}
		id, _ := ids.Resolve(r)
		fmt.Printf("client %s, tenant %s, plan %s, unknown key %v\n", id.Client(), id.Tenant, id.Plan, id.UnknownKey)
	}
	// Output:
	// client 10.0.0.2/32, tenant acme, plan pro, unknown key false
	// client 198.51.100.7/32, tenant anonymous, plan anonymous, unknown key false
	// client 10.0.0.2/32, tenant anonymous, plan anonymous, unknown key true
}

type userID struct{}

// A key part of the application's own: the user an authentication
// middleware put in the context. Store keys hold it only hashed.
func ExampleConfig_parts() {
	ids, err := identity.New(identity.Config{
		HashKey: []byte("a secret every gateway shares"),
		Parts: map[string]identity.PartFunc{
			"user_id": func(r *http.Request) (string, bool) {
				u, ok := r.Context().Value(userID{}).(string)
				return u, ok
			},
		},
	})
	if err != nil {
		panic(err)
	}
	perUser := &limiter.Policy{Name: "per_user", Algorithm: limiter.TokenBucket, Limit: 100, Period: time.Minute,
		Key: []string{"user_id"}}
	if err := ids.CheckPolicy(perUser); err != nil {
		panic(err)
	}
	key := func(user, addr string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		r = r.WithContext(contextWithUser(r, user))
		id, _ := ids.Resolve(r)
		return ids.Key(perUser, id)
	}
	fmt.Println("same user, two addresses, one key:", key("u-42", "198.51.100.1:1") == key("u-42", "203.0.113.9:1"))
	fmt.Println("two users, one address, two keys:", key("u-42", "198.51.100.1:1") != key("u-43", "198.51.100.1:1"))
	// Output:
	// same user, two addresses, one key: true
	// two users, one address, two keys: true
}

func contextWithUser(r *http.Request, user string) context.Context {
	return context.WithValue(r.Context(), userID{}, user)
}
