// Command byip is the shortest costgate program: a chi route limited to 100
// requests a minute per client address, counted in process memory.
//
//	go run ./examples/byip
//	curl -i localhost:8082/hello   # X-RateLimit-Remaining: 99, ... then 429
package main

import (
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/costgate/costgate/limiter/httplimit"
)

func main() {
	r := chi.NewRouter()
	r.With(httplimit.LimitByIP(100, time.Minute)).Get("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello\n"))
	})
	log.Fatal(http.ListenAndServe(":8082", r))
}
