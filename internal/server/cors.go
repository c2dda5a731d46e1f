package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/costgate/costgate/internal/jsonerror"
	"github.com/costgate/costgate/limiter/header"
)

// cors lets browser clients on the configured origins call the server and
// read its rate-limit headers. A preflight (OPTIONS with
// Access-Control-Request-Method) from an allowed origin is answered here,
// before any limit: browsers send them on their own, and they cost no store
// call. Credentials (cookies) are never allowed: callers identify
// themselves with an API key header.
type cors struct {
	any     bool
	origins []string
	allow   string // Access-Control-Allow-Headers
	expose  string // Access-Control-Expose-Headers
}

func newCORS(origins []string, apiKeyHeader string) *cors {
	c := &cors{
		any:     slices.Contains(origins, "*"),
		origins: origins,
		allow:   strings.Join([]string{"Content-Type", apiKeyHeader, "Authorization", "Costgate-Dry-Run", "Costgate-Cost-Debug"}, ", "),
		expose:  strings.Join(header.Exposed, ", "),
	}
	return c
}

func (c *cors) allowed(origin string) bool {
	return c.any || slices.Contains(c.origins, origin)
}

func (c *cors) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if !c.allowed(origin) {
			if preflight {
				jsonerror.Write(w, http.StatusForbidden, jsonerror.Body{Error: "cors_forbidden", Message: "origin " + origin + " may not call this server"})
				return
			}
			next.ServeHTTP(w, r) // served, but the browser will not show it to the page
			return
		}
		if c.any {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if preflight {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", c.allow)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", c.expose)
		next.ServeHTTP(w, r)
	})
}
