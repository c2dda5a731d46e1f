package gqllimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/costgate/costgate/internal/jsonkeys"
)

// One request, one reading. What costgate prices must be what the handler
// behind it executes, so the request is read once, strictly, here:
//
//   - A member of the GraphQL request (query, operationName, variables,
//     extensions; persistedQuery in extensions; sha256Hash and version in
//     persistedQuery) given twice, or in another letter case, is refused
//     (jsonkeys.Check): encoding/json matches struct fields in any case and
//     keeps the last duplicate, a map keeps the exact key, and other parsers
//     keep the first, so such a body means different things to different
//     readers.
//   - The body is one JSON object and nothing after it (gqlgen reads the
//     first value and ignores the rest).
//   - A persisted query is resolved here, and the handler is given the
//     request rewritten with the query in full and no persistedQuery
//     extension (as gqlgen's own APQ extension rewrites its RawParams), so
//     no second lookup can find another text.
//
// The extension then checks that gqlgen runs the text read here.

// The members of a GraphQL request checked for ambiguity, exactly as
// clients must spell them.
var (
	persistedQueryNames = jsonkeys.Names{"persistedQuery": {"sha256Hash": nil, "version": nil}}
	requestNames        = jsonkeys.Names{"query": nil, "operationName": nil, "variables": nil, "extensions": persistedQueryNames, "documentId": nil}
)

// ambiguous is the answer to a request jsonkeys.Check refused: a member
// given twice or in another letter case is 400 BAD_REQUEST, saying which;
// anything else that is not JSON gets notJSON.
func ambiguous(err error, notJSON *Error) *Error {
	var ke *jsonkeys.Error
	if errors.As(err, &ke) {
		return reject(http.StatusBadRequest, CodeBadRequest, "ambiguous request: %v (member names are case-sensitive and given once)", ke)
	}
	return notJSON
}

// isNull reports an absent or null JSON value.
func isNull(v json.RawMessage) bool {
	return v == nil || string(bytes.TrimSpace(v)) == "null"
}

// readBody reads a POST body into p, strictly (see above), in the one pass
// of jsonkeys.Read.
func readBody(body []byte, p *params) *Error {
	var query, operationName, variables, extensions, documentID []byte
	err := jsonkeys.Read(body, requestNames, func(name string, value []byte) {
		switch name {
		case "query":
			query = value
		case "documentId":
			documentID = value
		case "operationName":
			operationName = value
		case "variables":
			variables = value
		case "extensions":
			extensions = value
		}
	})
	if err != nil {
		return ambiguous(err, notAnObject())
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); t[0] != '{' && !isNull(t) {
		return notAnObject() // a string or a number; null is an empty request, as encoding/json reads it
	}
	var ok bool
	if p.Query, ok = stringOrNull(query); !ok {
		return notAnObject()
	}
	if p.OperationName, ok = stringOrNull(operationName); !ok {
		return notAnObject()
	}
	if p.documentID, ok = stringOrNull(documentID); !ok {
		return reject(http.StatusBadRequest, CodeBadRequest, "documentId must be a string")
	}
	if rerr := p.setVariables(variables); rerr != nil {
		return rerr
	}
	if !isNull(extensions) {
		p.Extensions = extensions
	}
	return nil
}

func notAnObject() *Error {
	return reject(http.StatusBadRequest, CodeBadRequest, "the body must be a JSON object with a query")
}

// stringOrNull decodes a member that must be a string; absent or null it is "".
func stringOrNull(value []byte) (string, bool) {
	if isNull(value) {
		return "", true
	}
	return jsonkeys.String(value)
}

// readQuery reads a GET request's parameters into p. A parameter given
// twice is refused: readers differ on which one counts.
func readQuery(q url.Values, p *params) *Error {
	for name := range requestNames {
		if len(q[name]) > 1 {
			return reject(http.StatusBadRequest, CodeBadRequest, "ambiguous request: the parameter %q is given more than once", name)
		}
	}
	p.Query, p.OperationName, p.documentID = q.Get("query"), q.Get("operationName"), q.Get("documentId")
	if v := q.Get("variables"); v != "" {
		if rerr := p.setVariables(json.RawMessage(v)); rerr != nil {
			return rerr
		}
	}
	if v := q.Get("extensions"); v != "" {
		if err := jsonkeys.Check([]byte(v), persistedQueryNames); err != nil {
			return ambiguous(err, reject(http.StatusBadRequest, CodeBadRequest, "extensions must be a JSON object"))
		}
		p.Extensions = json.RawMessage(v)
	}
	return nil
}

// setVariables keeps the variables, checked to be a JSON object that
// json.Unmarshal decodes into a map, so that operation.Variables can decode
// them when needed (few requests need them decoded).
func (p *params) setVariables(raw json.RawMessage) *Error {
	if isNull(raw) {
		return nil
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' || !json.Valid(raw) || !numbersFit(raw) {
		return reject(http.StatusBadRequest, CodeBadRequest, "variables must be a JSON object")
	}
	p.rawVariables = raw
	return nil
}

// numbersFit reports whether every number in raw, valid JSON, fits a
// float64, as json.Unmarshal into an any requires.
func numbersFit(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			start := i
			for i+1 < len(raw) && strings.IndexByte("+-.0123456789eE", raw[i+1]) >= 0 {
				i++
			}
			if _, err := strconv.ParseFloat(string(raw[start:i+1]), 64); err != nil {
				return false
			}
		}
	}
	return true
}

// persistedQueryOf reads extensions.persistedQuery (checked for ambiguity
// with the request). rest is the extensions without it, nil when nothing is
// left, for the handler.
func persistedQueryOf(extensions json.RawMessage) (pq *persistedQuery, rest json.RawMessage, e *Error) {
	if isNull(extensions) {
		return nil, nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(extensions, &m) != nil {
		return nil, nil, reject(http.StatusBadRequest, CodeBadRequest, "extensions must be a JSON object")
	}
	raw, ok := m["persistedQuery"]
	if !ok || isNull(raw) {
		return nil, extensions, nil
	}
	pq = &persistedQuery{}
	if json.Unmarshal(raw, pq) != nil {
		return nil, nil, reject(http.StatusBadRequest, CodeBadRequest, "extensions.persistedQuery takes a string sha256Hash and an integer version")
	}
	delete(m, "persistedQuery")
	if len(m) > 0 {
		rest, _ = json.Marshal(m) // decoded from JSON: it encodes
	}
	return pq, rest, nil
}

// canonical is a request as the handler is given it after a persisted
// query was resolved.
type canonical struct {
	Query         string          `json:"query"`
	OperationName string          `json:"operationName,omitempty"`
	Variables     json.RawMessage `json:"variables,omitempty"`
	Extensions    json.RawMessage `json:"extensions,omitempty"`
}

// rewrite gives the handler the request as it was read: the query in full,
// and extensions without persistedQuery.
func rewrite(r *http.Request, p *params, body []byte) []byte {
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		q.Set("query", p.Query)
		if p.Extensions == nil {
			q.Del("extensions")
		} else {
			q.Set("extensions", string(p.Extensions))
		}
		u := *r.URL
		u.RawQuery = q.Encode()
		r.URL = &u
		return body
	}
	b, err := json.Marshal(canonical{Query: p.Query, OperationName: p.OperationName, Variables: p.rawVariables, Extensions: p.Extensions})
	if err != nil { // the parts were read from JSON: they encode
		return body
	}
	return b
}
