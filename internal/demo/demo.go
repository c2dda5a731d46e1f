package main

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter/httplimit"
)

// product is an item of the example REST API's catalogue.
type product struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Price int    `json:"price_cents"`
}

// shop serves the example REST routes from a fixed, deterministic catalogue.
type shop struct{ products []product }

func newShop() *shop {
	adjectives := []string{"Sturdy", "Quiet", "Bright", "Compact", "Vintage"}
	things := []string{"Lamp", "Kettle", "Backpack", "Chair", "Notebook", "Teapot", "Bicycle", "Clock", "Scarf", "Mug"}
	s := &shop{}
	for i := range 50 {
		s.products = append(s.products, product{
			ID:    i + 1,
			Title: adjectives[i%len(adjectives)] + " " + things[i%len(things)],
			Price: 500 + (i*733)%9500,
		})
	}
	return s
}

// listProducts answers GET /api/products?first=N (default 20, at most 50).
func (s *shop) listProducts(w http.ResponseWriter, r *http.Request) {
	first := 20
	if v := r.URL.Query().Get("first"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": "first must be a non-negative integer"})
			return
		}
		first = n
	}
	first = min(first, len(s.products))
	writeJSON(w, http.StatusOK, map[string]any{"products": s.products[:first]})
}

// getProduct answers GET /api/products/{id}.
func (s *shop) getProduct(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(chi.URLParam(r, "id"))
	if err != nil || id < 1 || id > len(s.products) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no such product"})
		return
	}
	writeJSON(w, http.StatusOK, s.products[id-1])
}

// login is the example login: a few demo users with salted PBKDF2 password
// hashes. An unknown user and a wrong password get the same answer, after
// the same work: an unknown user is checked against a dummy hash.
type login struct {
	users map[string]credential
	dummy credential
}

type credential struct{ salt, hash []byte }

const pbkdf2Iterations = 20_000

func newCredential(password string) credential {
	salt := make([]byte, 16)
	rand.Read(salt)
	return credential{salt: salt, hash: derive(password, salt)}
}

func derive(password string, salt []byte) []byte {
	key, err := pbkdf2.Key(sha256.New, password, salt, pbkdf2Iterations, 32)
	if err != nil {
		panic(fmt.Sprintf("pbkdf2 with fixed, valid parameters: %v", err)) // cannot happen
	}
	return key
}

func newLogin() *login {
	return &login{
		users: map[string]credential{
			"alice": newCredential("wonderland"),
			"bob":   newCredential("builder"),
		},
		dummy: newCredential("no user has this password"),
	}
}

func (l *login) handle(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, httplimit.DefaultMaxBodyBytes)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": `the body must be JSON: {"username":"...","password":"..."}`})
		return
	}
	name, _ := httplimit.NormalizeUsername(body.Username)
	cred, known := l.users[name]
	if !known {
		cred = l.dummy
	}
	ok := subtle.ConstantTimeCompare(derive(body.Password, cred.salt), cred.hash) == 1
	if !ok || !known {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_credentials", "message": "wrong username or password"})
		return
	}
	token := make([]byte, 16)
	rand.Read(token)
	writeJSON(w, http.StatusOK, map[string]string{"token": hex.EncodeToString(token), "username": name})
}
