// Package jsonkeys refuses JSON objects whose members two readers could
// take differently.
//
// encoding/json matches a member to a struct field in any letter case
// (bytes.EqualFold, so "USERNAME" and "uſername" both fill `json:"username"`)
// and keeps the last of two duplicates; an exact-key reader (gqlgen's
// request parsing, JavaScript, most handlers in other languages) takes
// "username" only, often the first. When costgate limits by one reading of
// a body and the application acts on another, the limit is walked around:
// {"username":"victim","USERNAME":"x"} would be charged to one user while
// the handler logs in another. [Check] finds such bodies so that they can
// be refused before anything reads them.
//
// Keys are compared as decoded, escapes included: "\u0075sername" is
// "username".
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Names are the member names checked in one object. A name's own Names,
// when not nil, are checked inside that member's value when it is an
// object: Names{"extensions": {"persistedQuery": {"sha256Hash": nil}}}.
// Names should differ from each other in more than letter case.
type Names map[string]Names

// Error reports a member name that two readers could take differently.
type Error struct {
	// Path is where the object is: "" for the top level, else the names
	// leading to it joined by dots ("extensions.persistedQuery").
	Path string
	// Name is the checked name; Key the key found for it, as decoded.
	Name, Key string
	// Duplicate reports Name appearing more than once; otherwise Key is
	// Name in another letter case.
	Duplicate bool
}

func (e *Error) Error() string {
	where := "the object"
	if e.Path != "" {
		where = fmt.Sprintf("%q", e.Path)
	}
	if e.Duplicate {
		return fmt.Sprintf("%s has %q more than once", where, e.Name)
	}
	return fmt.Sprintf("%s has %q, %q in another letter case", where, e.Key, e.Name)
}

// ErrSyntax is wrapped by the error of Check for data that is not one JSON
// value in UTF-8.
var ErrSyntax = errors.New("not one JSON value in UTF-8")

// Check reads data, which must be exactly one JSON value in UTF-8, and
// returns an *Error for the first member in names that appears more than
// once in its object, or under a key encoding/json would take for it
// (equal under simple case folding) that is not exactly it. The top-level
// value is checked when it is an object, and inside it the objects names
// leads to; other members, and values that are not objects, are only read
// through. Data that is not one JSON value in UTF-8 gives an error wrapping
// ErrSyntax.
func Check(data []byte, names Names) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: bytes that are not UTF-8", ErrSyntax)
	}
	c := checker{dec: json.NewDecoder(bytes.NewReader(data))}
	c.dec.UseNumber() // a number too large for a float64 is still JSON
	if err := c.value(names, ""); err != nil {
		return asSyntax(err)
	}
	if _, err := c.dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the value", ErrSyntax)
	}
	return nil
}

// asSyntax marks the decoder's errors as ErrSyntax; an *Error stays itself.
func asSyntax(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %v", ErrSyntax, err)
}

// checker reads one JSON value through a decoder.
type checker struct {
	dec  *json.Decoder
	skip json.RawMessage // what is read through, kept to reuse its memory
}

// value reads one value; when names is not nil and the value is an object,
// its members in names are checked.
func (c *checker) value(names Names, path string) error {
	if names == nil {
		return c.dec.Decode(&c.skip) // read through whole, strings left unquoted
	}
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return c.members(names, path)
	case json.Delim('['):
		return c.skipRest()
	}
	return nil // a string, number, true, false or null
}

// members reads an object's members up to its closing brace.
func (c *checker) members(names Names, path string) error {
	seen := make(map[string]bool, len(names))
	for {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string) // the decoder gives nothing else in key position
		if !ok {
			return nil // the '}'
		}
		nested, err := checkKey(names, seen, key, path)
		if err != nil {
			return err
		}
		if err := c.value(nested, join(path, key)); err != nil {
			return err
		}
	}
}

// skipRest reads the rest of an array whose '[' the decoder has just given.
func (c *checker) skipRest() error {
	for c.dec.More() {
		if err := c.dec.Decode(&c.skip); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // the ']'
	return err
}

// checkKey reports key as a duplicate or a case variant of a name, and
// returns the names to check inside its value.
func checkKey(names Names, seen map[string]bool, key, path string) (Names, error) {
	if nested, ok := names[key]; ok {
		if seen[key] {
			return nil, &Error{Path: path, Name: key, Key: key, Duplicate: true}
		}
		seen[key] = true
		return nested, nil
	}
	for name := range names {
		if strings.EqualFold(key, name) {
			return nil, &Error{Path: path, Name: name, Key: key}
		}
	}
	return nil, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
