// Package demo is the example REST API the demo server limits: products (the
// same catalogue as the example GraphQL API) and a login.
package demo

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

	"github.com/costgate/costgate/graph"
	"github.com/costgate/costgate/graph/model"
	"github.com/costgate/costgate/internal/username"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// product is an item of the example REST API: the same products, with the
// same IDs, as the example GraphQL API serves (graph.Shop).
type product struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Price       int    `json:"price_cents"`
	Description string `json:"description"`
}

// Shop serves the example REST routes from the example GraphQL API's data.
type Shop struct{ data *graph.Shop }

// NewShop serves data (graph.NewShop(): the GraphQL API's own shop).
func NewShop(data *graph.Shop) *Shop { return &Shop{data: data} }

func restProduct(p *model.Product) product {
	return product{ID: p.ID, Title: p.Title, Price: p.PriceCents, Description: p.Description}
}

// maxPage bounds ?first=.
const maxPage = 50

// ListProducts answers GET /api/products?first=N (default 20, at most 50).
func (s *Shop) ListProducts(w http.ResponseWriter, r *http.Request) {
	first := 20
	if v := r.URL.Query().Get("first"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": "first must be a non-negative integer"})
			return
		}
		first = n
	}
	page, _ := s.data.Page(min(first, maxPage), "")
	out := make([]product, len(page))
	for i, p := range page {
		out[i] = restProduct(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"products": out})
}

// GetProduct answers GET /api/products/{id}: "p1" as in GraphQL, or "1".
func (s *Shop) GetProduct(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := strconv.Atoi(id); err == nil {
		id = "p" + id
	}
	p := s.data.Product(id)
	if p == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no such product"})
		return
	}
	writeJSON(w, http.StatusOK, restProduct(p))
}

// Login is the example login: a few demo users with salted PBKDF2 password
// hashes. An unknown user and a wrong password get the same answer, after
// the same work: an unknown user is checked against a dummy hash.
type Login struct {
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

// NewLogin returns the login with the demo users alice/wonderland and bob/builder.
func NewLogin() *Login {
	return &Login{
		users: map[string]credential{
			"alice": newCredential("wonderland"),
			"bob":   newCredential("builder"),
		},
		dummy: newCredential("no user has this password"),
	}
}

// ServeHTTP answers POST /login.
func (l *Login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, username.DefaultMaxBodyBytes)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": `the body must be JSON: {"username":"...","password":"..."}`})
		return
	}
	name, _ := username.Normalize(body.Username)
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
