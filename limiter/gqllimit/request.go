package gqllimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// One request, one reading. What costgate prices must be what the handler
// behind it executes, so the request is read once, strictly, here:
//
//   - A member of the GraphQL request (query, operationName, variables,
//     extensions; persistedQuery in extensions; sha256Hash and version in
//     persistedQuery) given twice, or in another letter case, is refused:
//     encoding/json matches struct fields in any case and keeps the last
//     duplicate, a map keeps the exact key, and other parsers keep the
//     first, so such a body means different things to different readers.
//   - The body is one JSON object and nothing after it (gqlgen reads the
//     first value and ignores the rest).
//   - A persisted query is resolved here, and the handler is given the
//     request rewritten with the query in full and no persistedQuery
//     extension (as gqlgen's own APQ extension rewrites its RawParams), so
//     no second lookup can find another text.
//
// The extension then checks that gqlgen runs the text read here.

// Members of a GraphQL request, exactly as clients must spell them.
const (
	memberQuery          = "query"
	memberOperationName  = "operationName"
	memberVariables      = "variables"
	memberExtensions     = "extensions"
	memberPersistedQuery = "persistedQuery"
	memberSHA256Hash     = "sha256Hash"
	memberVersion        = "version"
)

// member is one name and value of a JSON object, the name unescaped.
type member struct {
	name  string
	value json.RawMessage
}

// errNotObject is the reason a value is not one JSON object.
var errNotObject = errors.New("not a JSON object")

// objectMembers returns the members of the JSON object data, in order,
// duplicates kept. Anything but one object (and white space) is an error.
func objectMembers(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{name: name, value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return ms, nil
}

// pick returns the values of names among ms, nil for those absent. A name
// given twice, or a member that matches a name in another letter case
// (Unicode simple folding, as encoding/json matches), is refused.
func pick(ms []member, where string, names ...string) ([]json.RawMessage, *Error) {
	out := make([]json.RawMessage, len(names))
	for _, m := range ms {
		for i, name := range names {
			if !strings.EqualFold(m.name, name) {
				continue
			}
			if m.name != name {
				return nil, ambiguous(where, "%q is not %q: member names are case-sensitive", m.name, name)
			}
			if out[i] != nil {
				return nil, ambiguous(where, "%q is given twice", name)
			}
			out[i] = m.value
		}
	}
	return out, nil
}

func ambiguous(where, format string, args ...any) *Error {
	e := reject(http.StatusBadRequest, CodeBadRequest, format, args...)
	e.Message = "ambiguous " + where + ": " + e.Message
	return e
}

// isNull reports an absent or null JSON value.
func isNull(v json.RawMessage) bool {
	return v == nil || string(bytes.TrimSpace(v)) == "null"
}

// readBody reads a POST body into p, strictly (see above).
func readBody(body []byte, p *params) *Error {
	bad := reject(http.StatusBadRequest, CodeBadRequest, "the body must be a JSON object with a query")
	ms, err := objectMembers(body)
	if err != nil {
		return bad
	}
	vs, rerr := pick(ms, "request", memberQuery, memberOperationName, memberVariables, memberExtensions)
	if rerr != nil {
		return rerr
	}
	if !isNull(vs[0]) && json.Unmarshal(vs[0], &p.Query) != nil {
		return bad
	}
	if !isNull(vs[1]) && json.Unmarshal(vs[1], &p.OperationName) != nil {
		return reject(http.StatusBadRequest, CodeBadRequest, "operationName must be a string")
	}
	if rerr := p.setVariables(vs[2]); rerr != nil {
		return rerr
	}
	if !isNull(vs[3]) {
		p.Extensions = vs[3]
	}
	return nil
}

// readQuery reads a GET request's parameters into p. A parameter given
// twice is refused: readers differ on which one counts.
func readQuery(q url.Values, p *params) *Error {
	for _, name := range []string{memberQuery, memberOperationName, memberVariables, memberExtensions} {
		if len(q[name]) > 1 {
			return ambiguous("request", "%q is given twice", name)
		}
	}
	p.Query, p.OperationName = q.Get(memberQuery), q.Get(memberOperationName)
	if v := q.Get(memberVariables); v != "" {
		if rerr := p.setVariables(json.RawMessage(v)); rerr != nil {
			return rerr
		}
	}
	if v := q.Get(memberExtensions); v != "" {
		p.Extensions = json.RawMessage(v)
	}
	return nil
}

// setVariables keeps the variables, raw for the handler and decoded for pricing.
func (p *params) setVariables(raw json.RawMessage) *Error {
	if isNull(raw) {
		return nil
	}
	if json.Unmarshal(raw, &p.Variables) != nil {
		return reject(http.StatusBadRequest, CodeBadRequest, "variables must be a JSON object")
	}
	p.rawVariables = raw
	return nil
}

// persistedQueryOf reads extensions.persistedQuery, strictly. rest is the
// extensions without it (nil when nothing is left), for the handler.
func persistedQueryOf(extensions json.RawMessage) (pq *persistedQuery, rest json.RawMessage, e *Error) {
	if isNull(extensions) {
		return nil, nil, nil
	}
	ms, err := objectMembers(extensions)
	if err != nil {
		return nil, nil, reject(http.StatusBadRequest, CodeBadRequest, "extensions must be a JSON object")
	}
	vs, e := pick(ms, "extensions", memberPersistedQuery)
	if e != nil || isNull(vs[0]) {
		return nil, extensions, e
	}
	pms, err := objectMembers(vs[0])
	if err != nil {
		return nil, nil, reject(http.StatusBadRequest, CodeBadRequest, "extensions.persistedQuery must be a JSON object")
	}
	pvs, e := pick(pms, "extensions.persistedQuery", memberSHA256Hash, memberVersion)
	if e != nil {
		return nil, nil, e
	}
	pq = &persistedQuery{}
	if !isNull(pvs[0]) && json.Unmarshal(pvs[0], &pq.Sha256Hash) != nil ||
		!isNull(pvs[1]) && json.Unmarshal(pvs[1], &pq.Version) != nil {
		return nil, nil, reject(http.StatusBadRequest, CodeBadRequest, "extensions.persistedQuery takes a string sha256Hash and an integer version")
	}
	return pq, withoutMember(ms, memberPersistedQuery), nil
}

// withoutMember re-encodes the object of ms without the member name; nil
// when nothing is left.
func withoutMember(ms []member, name string) json.RawMessage {
	var b bytes.Buffer
	for _, m := range ms {
		if m.name == name {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	if b.Len() == 0 {
		return nil
	}
	b.WriteByte('}')
	return b.Bytes()
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
		q.Set(memberQuery, p.Query)
		if p.Extensions == nil {
			q.Del(memberExtensions)
		} else {
			q.Set(memberExtensions, string(p.Extensions))
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
