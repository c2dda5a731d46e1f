// Package manifest reads the lists of trusted GraphQL documents that
// client build tools write: Apollo's persisted query manifest and the
// {"id": "document"} maps of Relay and GraphQL Codegen.
//
//	docs, err := manifest.Parse(data)
package manifest

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ApolloFormat is the format member of Apollo's persisted query manifest
// (@apollo/generate-persisted-query-manifest, Apollo iOS and Kotlin):
//
//	{"format": "apollo-persisted-query-manifest", "version": 1,
//	 "operations": [{"id": "<sha256 of body>", "name": "Shop", "type": "query", "body": "query Shop { ... }"}]}
const ApolloFormat = "apollo-persisted-query-manifest"

// Document is one entry of a manifest.
type Document struct {
	// ID is what clients send for it (documentId, or the hash of
	// extensions.persistedQuery): Apollo's SHA-256 of the body, or the
	// map's key (Relay's MD5, GraphQL Codegen's SHA-1 or SHA-256, or an
	// id of the build's own).
	ID string
	// Name and Type are what Apollo's manifest says of the operation
	// ("" in a map).
	Name, Type string
	// Body is the document's text, exactly as clients send it.
	Body string
}

// Error is a problem of one entry (Entry, its id or its place) or of the
// manifest as a whole (Entry "").
type Error struct {
	Entry  string
	Reason string
}

func (e *Error) Error() string {
	if e.Entry == "" {
		return e.Reason
	}
	return fmt.Sprintf("entry %q: %s", e.Entry, e.Reason)
}

// maxErrors bounds the problems one error reports.
const maxErrors = 20

// Parse reads a manifest in either format, telling them apart by Apollo's
// format member. Every entry is checked: an id given twice with two
// different documents, an id shaped like a hash (Apollo's always are) that
// is not the hash of its document, an empty id or document, a manifest that
// lists nothing, or one that is not JSON, is an *Error (several are joined,
// at most 20). An id given twice with the same document counts once.
func Parse(data []byte) ([]Document, error) {
	members, err := object(data)
	if err != nil {
		return nil, err
	}
	var docs []Document
	var p problems
	if f, ok := members.get("format"); ok && isString(f, ApolloFormat) {
		docs = apollo(members, &p)
	} else {
		docs = idMap(members, &p)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	docs = dedupe(docs, &p)
	if err := p.err(); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, &Error{Reason: "the manifest lists no documents"}
	}
	return docs, nil
}

type member struct {
	key   string
	value json.RawMessage
}

type members []member

func (ms members) get(key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// object reads data as one JSON object, its members in order (duplicates
// kept: encoding/json would keep the last in silence).
func object(data []byte) (members, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	notJSON := func(err error) error {
		return &Error{Reason: fmt.Sprintf("not a JSON object (Apollo's persisted query manifest, or a map of ids to documents): %v", err)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, notJSON(fmt.Errorf("it starts with %v", tok))
	}
	var ms members
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notJSON(err)
		}
		key, _ := tok.(string) // an object's keys are strings
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, notJSON(err)
		}
		ms = append(ms, member{key, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notJSON(errors.New("more after the object"))
	}
	return ms, nil
}

func isString(raw json.RawMessage, want string) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// problems collects the errors of a manifest.
type problems []error

func (p *problems) add(entry, format string, args ...any) {
	*p = append(*p, &Error{Entry: entry, Reason: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	if len(p) > maxErrors {
		return errors.Join(append(p[:maxErrors:maxErrors], fmt.Errorf("%d more problems", len(p)-maxErrors))...)
	}
	return errors.Join(p...)
}

// apollo reads Apollo's persisted query manifest: version 1, and each id the
// SHA-256 of its body.
func apollo(ms members, p *problems) []Document {
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.key] {
			p.add("", "the manifest has %q more than once", m.key)
		}
		seen[m.key] = true
	}
	var version int
	if raw, _ := ms.get("version"); json.Unmarshal(raw, &version) != nil || version != 1 {
		p.add("", "%s version %s: only version 1 is known", ApolloFormat, orAbsent(raw))
		return nil
	}
	var ops []struct {
		ID   *string `json:"id"`
		Name string  `json:"name"`
		Type string  `json:"type"`
		Body *string `json:"body"`
	}
	if raw, ok := ms.get("operations"); !ok || json.Unmarshal(raw, &ops) != nil {
		p.add("", "operations must be a list of {id, name, type, body}")
		return nil
	}
	docs := make([]Document, 0, len(ops))
	for i, op := range ops {
		entry := fmt.Sprintf("operations[%d]", i)
		if op.ID != nil && *op.ID != "" {
			entry = *op.ID
		}
		switch {
		case op.ID == nil || *op.ID == "":
			p.add(entry, "no id")
		case op.Body == nil || strings.TrimSpace(*op.Body) == "":
			p.add(entry, "no body")
		case sha256Hex(*op.Body) != *op.ID:
			p.add(entry, "the id is not the SHA-256 of the body (%s), as Apollo's manifest ids are: the body was changed after the manifest was generated, or the id belongs to another document", sha256Hex(*op.Body))
		default:
			docs = append(docs, Document{ID: *op.ID, Name: op.Name, Type: op.Type, Body: *op.Body})
		}
	}
	return docs
}

func orAbsent(raw json.RawMessage) string {
	if raw == nil {
		return "absent"
	}
	return string(raw)
}

// idMap reads a {"id": "document"} map (Relay's persisted queries, GraphQL
// Codegen's persisted documents). An id shaped like a hash must be that
// hash of its document.
func idMap(ms members, p *problems) []Document {
	docs := make([]Document, 0, len(ms))
	for _, m := range ms {
		var body string
		switch {
		case m.key == "":
			p.add(m.key, "an empty id")
			continue
		case json.Unmarshal(m.value, &body) != nil:
			p.add(m.key, "the document must be a string (a map's values are document texts; Apollo's manifest has \"format\": %q)", ApolloFormat)
			continue
		case strings.TrimSpace(body) == "":
			p.add(m.key, "an empty document")
			continue
		}
		if algorithm, want, ok := hashOf(m.key, body); ok && !strings.EqualFold(want, strings.TrimPrefix(m.key, "sha256:")) {
			p.add(m.key, "the id has the shape of a %s hash but is not the %s of its document (%s): the document was changed after the ids were computed, or the id belongs to another document", algorithm, algorithm, want)
			continue
		}
		docs = append(docs, Document{ID: m.key, Body: body})
	}
	return docs
}

// hashOf reports the hash an id must be, by its shape: "sha256:" and its
// hex digits (GraphQL-over-HTTP's prefixed id), or 64, 40 or 32 hex digits
// (the SHA-256, SHA-1 or MD5 that Apollo, GraphQL Codegen and Relay write).
// Any other id is the build's own, and names its document as it is.
func hashOf(id, body string) (algorithm, want string, ok bool) {
	if _, prefixed := strings.CutPrefix(id, "sha256:"); prefixed {
		return "SHA-256", sha256Hex(body), true
	}
	if !isHex(id) {
		return "", "", false
	}
	switch len(id) {
	case sha256.Size * 2:
		return "SHA-256", sha256Hex(body), true
	case sha1.Size * 2:
		s := sha1.Sum([]byte(body))
		return "SHA-1", hex.EncodeToString(s[:]), true
	case md5.Size * 2:
		s := md5.Sum([]byte(body))
		return "MD5", hex.EncodeToString(s[:]), true
	}
	return "", "", false
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return s != "" && err == nil
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// dedupe keeps the first of an id given twice with the same document, and
// reports one given twice with different documents.
func dedupe(docs []Document, p *problems) []Document {
	byID := make(map[string]int, len(docs))
	out := docs[:0]
	for _, d := range docs {
		if i, ok := byID[d.ID]; ok {
			if out[i].Body != d.Body {
				p.add(d.ID, "given twice, with two different documents")
			}
			continue
		}
		byID[d.ID] = len(out)
		out = append(out, d)
	}
	return out
}
