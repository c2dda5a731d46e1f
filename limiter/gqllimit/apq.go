package gqllimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// persistedQuery is extensions.persistedQuery of Apollo's Automatic Persisted Queries.
type persistedQuery struct {
	Version    int    `json:"version"`
	Sha256Hash string `json:"sha256Hash"`
}

// persisted resolves an Automatic Persisted Query. With a hash and no query it returns
// the query the hash was registered with; with both, it checks that the hash is the
// query's and returns the hash to register the query under once it was charged. A
// request without extensions.persistedQuery is returned as it is; one with it is
// rewritten (p.Query in full, p.Extensions without persistedQuery) for the handler.
func (l *Limiter) persisted(ctx context.Context, p *params) (query, hash string, rewritten bool, err *Error) {
	pq, rest, err := persistedQueryOf(p.Extensions)
	if err != nil || pq == nil {
		return p.Query, "", false, err
	}
	p.Extensions = rest
	switch {
	case l.cfg.PersistedQueries == nil:
		if p.Query == "" {
			// Apollo's clients stop sending hashes alone on this answer.
			return "", "", false, reject(http.StatusBadRequest, CodePersistedQueryNotSupported, "PersistedQueryNotSupported")
		}
		return p.Query, "", true, nil // the query is all there is: run it
	case pq.Version != 1:
		return "", "", false, reject(http.StatusBadRequest, CodeBadRequest, "unsupported persisted query version %d (1 is)", pq.Version)
	case p.Query == "":
		q, ok := l.cfg.PersistedQueries.Get(ctx, pq.Sha256Hash)
		if !ok {
			// 200, as Apollo Server answers: the client then sends the query with its hash.
			return "", "", false, reject(http.StatusOK, CodePersistedQueryNotFound, "PersistedQueryNotFound")
		}
		p.Query = q
		return q, "", true, nil
	}
	sum := sha256.Sum256([]byte(p.Query))
	if hex.EncodeToString(sum[:]) != pq.Sha256Hash {
		return "", "", false, reject(http.StatusBadRequest, CodePersistedQueryHashMismatch, "provided sha does not match query")
	}
	return p.Query, pq.Sha256Hash, true, nil
}

// register keeps a persisted query whose operation was charged (or, in
// measure mode, admitted): a query refused before its charge, by validation
// or a limit, never takes a place in the cache.
func (l *Limiter) register(ctx context.Context, hash, query string) {
	if hash != "" && l.cfg.PersistedQueries != nil {
		l.cfg.PersistedQueries.Add(ctx, hash, query)
	}
}
