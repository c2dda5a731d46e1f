package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// The console: one page of plain HTML, CSS and JavaScript, embedded (it
// works with no internet), served without a token. Its calls carry the
// token the operator types once, kept in the page's session storage.

//go:embed console
var consoleFiles embed.FS

// consoleCSP lets the page load only its own files and call only its own
// origin: a username or key shown from top cannot run as script.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func consoleHandler() http.Handler {
	sub, _ := fs.Sub(consoleFiles, "console") // a constant path of the embedded tree
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		switch r.URL.Path {
		case "/":
			http.ServeFileFS(w, r, sub, "index.html")
		default:
			r2 := *r
			u := *r.URL
			u.Path = r.URL.Path[len("/assets"):]
			r2.URL = &u
			files.ServeHTTP(w, &r2)
		}
	})
}
