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
// be refused before anything reads them; [Read] does the same and hands
// back the members it checked, so that the body is read once.
//
// Keys are compared as decoded, escapes included: "\u0075sername" is
// "username".
package jsonkeys

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
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
	return Read(data, names, nil)
}

// Read is Check that, once data passed, hands found (when not nil) each
// member of the top-level object that names holds, in the order they came:
// its name and its value as raw JSON, a slice of data without the spaces
// around it. The values are those of the same single pass.
func Read(data []byte, names Names, found func(name string, value []byte)) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: bytes that are not UTF-8", ErrSyntax)
	}
	s := scanner{data: data}
	s.space()
	if err := s.value(names, "", 0); err != nil {
		return err
	}
	s.space()
	if s.i != len(data) {
		return s.fail("data after the value")
	}
	if found != nil {
		for _, m := range s.top.all() {
			found(m.name, data[m.start:m.end])
		}
	}
	return nil
}

// maxDepth bounds the nesting of objects and arrays, as encoding/json does.
const maxDepth = 10000

// scanner reads one JSON value of data, checked against the grammar as it goes.
type scanner struct {
	data []byte
	i    int
	top  members // the top-level members in names
}

// members are where the checked members of the top-level object are in data.
type members struct {
	buf  [4]member
	n    int
	more []member
}

type member struct {
	name       string
	start, end int
}

func (ms *members) add(m member) {
	if ms.n < len(ms.buf) {
		ms.buf[ms.n] = m
		ms.n++
		return
	}
	ms.more = append(ms.more, m)
}

func (ms *members) all() []member {
	if len(ms.more) == 0 {
		return ms.buf[:ms.n]
	}
	return append(ms.buf[:ms.n:ms.n], ms.more...)
}

func (s *scanner) fail(what string) error {
	if s.i >= len(s.data) {
		return fmt.Errorf("%w: unexpected end of data", ErrSyntax)
	}
	return fmt.Errorf("%w: %s at offset %d", ErrSyntax, what, s.i)
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value at s.i; when names is not nil and the value is an
// object, its members in names are checked.
func (s *scanner) value(names Names, path string, depth int) error {
	if s.i >= len(s.data) {
		return s.fail("no value")
	}
	switch c := s.data[s.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return s.fail(fmt.Sprintf("nesting deeper than %d", maxDepth))
		}
		if c == '[' {
			return s.array(depth)
		}
		return s.object(names, path, depth)
	case c == '"':
		_, err := s.string()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("not a JSON value")
}

func (s *scanner) literal(word string) error {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return s.fail("not a JSON value")
	}
	s.i += len(word)
	return nil
}

func (s *scanner) number() error {
	digits := func() int {
		n := 0
		for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.data[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.data) && s.data[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return s.fail("a bad number")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.fail("a bad number")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("a bad number")
		}
	}
	return nil
}

// string reads a string at s.i and returns it as written, quotes and
// escapes included; it checks every escape.
func (s *scanner) string() ([]byte, error) {
	start := s.i
	for s.i++; s.i < len(s.data); s.i++ {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.data[start:s.i], nil
		case c == '\\':
			if err := s.escape(); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, s.fail("a control character in a string")
		}
	}
	return nil, s.fail("an unterminated string")
}

// escape checks the escape at s.i and leaves s.i on its last byte.
func (s *scanner) escape() error {
	if s.i+1 >= len(s.data) {
		s.i = len(s.data)
		return s.fail("an unterminated string")
	}
	switch s.data[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		if s.i+6 > len(s.data) || Hex4(s.data[s.i+2:s.i+6]) < 0 {
			return s.fail(`a bad \u escape`)
		}
		s.i += 5
		return nil
	}
	return s.fail("a bad escape")
}

// Hex4 is the value of four hexadecimal digits (of a \uXXXX escape), or -1.
func Hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

func (s *scanner) array(depth int) error {
	s.i++ // '['
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(nil, "", depth+1); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return s.fail("an array not closed")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("an array not closed")
		}
	}
}

// object reads an object; when names is not nil, its members in names are
// checked, and at the top level handed to s.found.
func (s *scanner) object(names Names, path string, depth int) error {
	s.i++ // '{'
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	var seen seenNames
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.fail("an object key that is not a string")
		}
		raw, err := s.string()
		if err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.fail("a key without a value")
		}
		s.i++
		s.space()
		var nested Names
		name, checked := "", false
		if names != nil {
			if name, nested, checked, err = checkKey(names, &seen, raw, path); err != nil {
				return err
			}
		}
		start := s.i
		if nested != nil {
			err = s.value(nested, join(path, name), depth+1)
		} else {
			err = s.value(nil, "", depth+1)
		}
		if err != nil {
			return err
		}
		if checked && path == "" {
			s.top.add(member{name: name, start: start, end: s.i})
		}
		s.space()
		if s.i >= len(s.data) {
			return s.fail("an object not closed")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("an object not closed")
		}
	}
}

// seenNames are the names of one object read so far: a few, kept without a
// map (and, while they fit in buf, without an allocation).
type seenNames struct {
	buf  [4]string
	n    int
	more []string
}

func (n *seenNames) add(name string) bool {
	for _, s := range n.buf[:n.n] {
		if s == name {
			return false
		}
	}
	for _, s := range n.more {
		if s == name {
			return false
		}
	}
	if n.n < len(n.buf) {
		n.buf[n.n] = name
		n.n++
	} else {
		n.more = append(n.more, name)
	}
	return true
}

// checkKey reports the key raw (a string as written) as a duplicate or a
// case variant of a name; else it returns the name it is (checked) and the
// names to check inside its value.
func checkKey(names Names, seen *seenNames, raw []byte, path string) (name string, nested Names, checked bool, err error) {
	key := raw[1 : len(raw)-1]
	decoded := ""
	if containsBackslash(key) {
		decoded = unquote(key)
		key = []byte(decoded)
	}
	for candidate, inner := range names {
		if string(key) == candidate {
			if !seen.add(candidate) {
				return "", nil, false, &Error{Path: path, Name: candidate, Key: candidate, Duplicate: true}
			}
			return candidate, inner, true, nil
		}
	}
	for candidate := range names {
		if strings.EqualFold(string(key), candidate) {
			return "", nil, false, &Error{Path: path, Name: candidate, Key: string(key)}
		}
	}
	return "", nil, false, nil
}

func containsBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// String decodes value, a JSON string as Read hands it (quotes included),
// as encoding/json does; ok is false when value is not a string.
func String(value []byte) (s string, ok bool) {
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", false
	}
	text := value[1 : len(value)-1]
	if !containsBackslash(text) {
		return string(text), true
	}
	return unquote(text), true
}

// unquote decodes the text of a string whose escapes were checked: a lone
// or broken surrogate becomes U+FFFD, as encoding/json makes it.
func unquote(text []byte) string {
	var b strings.Builder // one allocation: the text only shrinks
	b.Grow(len(text))
	for i := 0; i < len(text); i++ {
		run := bytes.IndexByte(text[i:], '\\')
		if run < 0 {
			b.Write(text[i:])
			break
		}
		b.Write(text[i : i+run])
		i += run + 1
		switch text[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := Hex4(text[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(text) && text[i+1] == '\\' && text[i+2] == 'u' {
					r2 = Hex4(text[i+3 : i+7])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					b.WriteRune(dec)
					i += 6
					continue
				}
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default: // '"', '\\', '/'
			b.WriteByte(text[i])
		}
	}
	return b.String()
}
