package gqllimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// persistedQuery is extensions.persistedQuery of Apollo's Automatic Persisted Queries.
type persistedQuery struct {
	Version    int    `json:"version"`
	Sha256Hash string `json:"sha256Hash"`
}

// persisted resolves an Automatic Persisted Query. With a hash and no query it returns
// the query the hash was registered with; with both, it checks that the hash is the
// query's and reports that the query is to be registered (once it passed the limits).
// A request without extensions.persistedQuery is returned as it is.
func (l *Limiter) persisted(ctx context.Context, query string, extensions json.RawMessage) (resolved string, hash string, err *Error) {
	if len(extensions) == 0 {
		return query, "", nil
	}
	var ext struct {
		PersistedQuery *persistedQuery `json:"persistedQuery"`
	}
	if json.Unmarshal(extensions, &ext) != nil {
		return "", "", reject(http.StatusBadRequest, CodeBadRequest, "extensions must be a JSON object")
	}
	pq := ext.PersistedQuery
	switch {
	case pq == nil:
		return query, "", nil
	case l.cfg.PersistedQueries == nil:
		if query == "" {
			// Apollo's clients stop sending hashes alone on this answer.
			return "", "", reject(http.StatusBadRequest, CodePersistedQueryNotSupported, "PersistedQueryNotSupported")
		}
		return query, "", nil // the query is all there is: run it
	case pq.Version != 1:
		return "", "", reject(http.StatusBadRequest, CodeBadRequest, "unsupported persisted query version %d (1 is)", pq.Version)
	case query == "":
		q, ok := l.cfg.PersistedQueries.Get(ctx, pq.Sha256Hash)
		if !ok {
			// 200, as Apollo Server answers: the client then sends the query with its hash.
			return "", "", reject(http.StatusOK, CodePersistedQueryNotFound, "PersistedQueryNotFound")
		}
		return q, "", nil
	}
	sum := sha256.Sum256([]byte(query))
	if hex.EncodeToString(sum[:]) != pq.Sha256Hash {
		return "", "", reject(http.StatusBadRequest, CodePersistedQueryHashMismatch, "provided sha does not match query")
	}
	return query, pq.Sha256Hash, nil
}

// register keeps a persisted query that passed the limits before validation.
func (l *Limiter) register(ctx context.Context, hash, query string) {
	if hash != "" && l.cfg.PersistedQueries != nil {
		l.cfg.PersistedQueries.Add(ctx, hash, query)
	}
}
