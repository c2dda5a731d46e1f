package gqlproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/costgate/costgate/complexity"
	"github.com/costgate/costgate/internal/jsonkeys"
)

// The upstream's reply is copied to the client as it is read, never held
// whole: a JSON scanner checks it, drops the __typename the proxy asked for,
// and reports the "data" member to a complexity.ActualCounter. The client's
// body is held back until commitAt bytes are ready (so that a small reply
// that turns out malformed is still a clean 502), then streamed.

const (
	// commitAt is how much of the answer is held before the client gets the
	// first byte, in streaming mode.
	commitAt = 64 << 10
	// readBuffer is the scanner's window on the upstream's reply.
	readBuffer = 32 << 10
	// maxNesting bounds the nesting of the reply's JSON (GraphQL replies
	// follow the query's depth; JSON scalars add a little).
	maxNesting = 512
	// maxKey bounds one object key: response keys are the query's names.
	maxKey = 64 << 10
	// maxText is the longest string whose text the counter is given (a type name).
	maxText = 1024
	// maxNumber bounds a number's text.
	maxNumber = 64
	// maxExtensions bounds the upstream's "extensions", held until the end
	// for extensions.cost to be added to them.
	maxExtensions = 1 << 20
	// maxLocations bounds an error's "locations", read whole to be moved
	// back into the client's document.
	maxLocations = 64 << 10
)

// errReplyTooLarge is a reply over Config.MaxResponseBytes.
var errReplyTooLarge = errors.New("reply larger than graphql.max_response_bytes")

// replyWriter is the client's body: held until commitAt bytes (never, at 0),
// then written through. A nil replyWriter drops what is written to it.
type replyWriter struct {
	w         http.ResponseWriter
	commitAt  int
	max       int // > 0: more than this is an error (the upstream's extensions)
	pending   []byte
	out       *bufio.Writer
	committed bool
	err       error // the client's connection failed, or max was passed
}

func (o *replyWriter) Write(b []byte) {
	if o == nil || o.err != nil {
		return
	}
	if o.committed {
		if _, err := o.out.Write(b); err != nil {
			o.err = err
		}
		return
	}
	if o.room(len(b)) {
		o.pending = append(o.pending, b...)
		o.held()
	}
}

func (o *replyWriter) putByte(c byte) {
	if o == nil || o.err != nil {
		return
	}
	if o.committed {
		if err := o.out.WriteByte(c); err != nil {
			o.err = err
		}
		return
	}
	if o.room(1) {
		o.pending = append(o.pending, c)
		o.held()
	}
}

func (o *replyWriter) WriteString(s string) {
	if o == nil || o.err != nil {
		return
	}
	if o.committed {
		if _, err := o.out.WriteString(s); err != nil {
			o.err = err
		}
		return
	}
	if o.room(len(s)) {
		o.pending = append(o.pending, s...)
		o.held()
	}
}

// room reports whether n more bytes may be held (else o.err says why).
func (o *replyWriter) room(n int) bool {
	if o.max > 0 && len(o.pending)+n > o.max {
		o.err = fmt.Errorf("extensions larger than %d bytes", o.max)
		return false
	}
	if o.pending == nil {
		o.pending = getBuffer()
	}
	return true
}

// held commits once commitAt bytes are held.
func (o *replyWriter) held() {
	if o.commitAt > 0 && len(o.pending) >= o.commitAt {
		o.commit(-1)
	}
}

// commit writes the status (200) and headers, then what is pending and,
// from there on, what is written, through a buffer; length is the body's
// whole length when known (else -1).
func (o *replyWriter) commit(length int) {
	o.writeHeader(length)
	o.committed = true
	o.out = writers.Get().(*bufio.Writer)
	o.out.Reset(o.w)
	if _, err := o.out.Write(o.pending); err != nil {
		o.err = err
	}
	o.pending = o.pending[:0]
}

func (o *replyWriter) writeHeader(length int) {
	h := o.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if length >= 0 {
		h.Set("Content-Length", strconv.Itoa(length))
	}
	o.w.WriteHeader(http.StatusOK)
}

// close writes what is left: the whole answer, when nothing was committed,
// in one write.
func (o *replyWriter) close() error {
	if !o.committed {
		o.writeHeader(len(o.pending))
		o.committed = true
		if _, err := o.w.Write(o.pending); err != nil && o.err == nil {
			o.err = err
		}
		return o.err
	}
	if err := o.out.Flush(); err != nil && o.err == nil {
		o.err = err
	}
	return o.err
}

// release gives the writer's buffers back for the next reply; o is not
// used again.
func (o *replyWriter) release() {
	putBuffer(o.pending)
	o.pending = nil
	if o.out != nil {
		o.out.Reset(nil)
		writers.Put(o.out)
		o.out = nil
	}
}

// The buffers of a reply are reused from one reply to the next: a reply
// held whole (up to commitAt, or Config.MaxResponseBytes) and a window on
// the upstream's would otherwise cost the garbage collector their size each
// time.
var (
	buffers = sync.Pool{New: func() any { return new([]byte) }}
	windows = sync.Pool{New: func() any { b := make([]byte, readBuffer); return &b }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, readBuffer) }}
)

// maxPooled is the largest buffer kept for reuse: a larger one (a reply
// held whole under a large MaxResponseBytes) goes to the garbage collector.
const maxPooled = 2 * commitAt

func getBuffer() []byte { return (*buffers.Get().(*[]byte))[:0] }

func putBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooled {
		return
	}
	b = b[:0]
	buffers.Put(&b)
}

// scanner reads the upstream's reply through a window of its own.
type scanner struct {
	src     io.Reader
	buf     []byte
	r, n    int
	read    int64
	limit   int64 // > 0: Config.MaxResponseBytes
	eof     bool
	err     error          // a read error (the upstream's connection, its deadline)
	watch   []*replyWriter // a failed writer stops the reading
	key     []byte
	text    []byte // the decoded text of the last string, up to textMax
	textMax int
	long    bool   // the last string was longer than textMax
	strip   string // a key dropped wherever it appears in data ("": none)
	syntax  int64  // where the reply stopped being JSON, when it did
	// inserted is what the proxy wrote into the query it forwarded: the
	// errors' locations are moved back into the client's document.
	inserted []insertion
}

func newScanner(src io.Reader, limit int64) *scanner {
	return &scanner{src: src, buf: *windows.Get().(*[]byte), limit: limit}
}

// release gives the scanner's window back for the next reply; s is not used again.
func (s *scanner) release() {
	buf := s.buf
	s.buf, s.src = nil, nil
	windows.Put(&buf)
}

// errSyntax is a reply that is not JSON, or not shaped as a GraphQL response.
type errSyntax struct {
	offset int64
	what   string
}

func (e *errSyntax) Error() string { return fmt.Sprintf("%s at byte %d", e.what, e.offset) }

func (s *scanner) fail(what string) error {
	if s.err != nil {
		return s.err
	}
	return &errSyntax{offset: s.read - int64(s.n-s.r), what: what}
}

// fill makes n bytes available unless the reply ends first; it reports
// whether they are.
func (s *scanner) fill(n int) bool {
	n = min(n, len(s.buf))
	for s.n-s.r < n && !s.eof && s.err == nil {
		for _, w := range s.watch {
			if w.err != nil {
				s.err = w.err
				return false
			}
		}
		if s.r > 0 {
			s.n = copy(s.buf, s.buf[s.r:s.n])
			s.r = 0
		}
		k, err := s.src.Read(s.buf[s.n:])
		s.n += k
		s.read += int64(k)
		switch {
		case s.limit > 0 && s.read > s.limit:
			s.err = fmt.Errorf("%w (%d bytes)", errReplyTooLarge, s.limit)
		case errors.Is(err, io.EOF):
			s.eof = true
		case err != nil:
			s.err = err
		}
	}
	return s.n-s.r >= n
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	for s.r < s.n || s.fill(1) {
		switch c := s.buf[s.r]; c {
		case ' ', '\t', '\n', '\r':
			s.r++
		default:
			return c
		}
	}
	return 0
}

// end checks that nothing but whitespace follows the reply.
func (s *scanner) end() error {
	if s.peek() != 0 || s.err != nil {
		return s.fail("text after the reply")
	}
	return nil
}

// value copies one JSON value to out (nil: checked and dropped) and reports
// it to count (nil: not priced).
func (s *scanner) value(out *replyWriter, count *complexity.ActualCounter, depth int) error {
	switch c := s.peek(); {
	case c == '{':
		drop := ""
		if count != nil {
			drop = s.strip
		}
		return s.object(out, count, depth, drop)
	case c == '[':
		return s.array(out, count, depth)
	case c == '"':
		if err := s.string(out, maxText); err != nil {
			return err
		}
		if count != nil {
			text := s.text
			if s.long {
				text = nil
			}
			count.String(text)
		}
		return nil
	case c == 't':
		return s.literal(out, count, "true")
	case c == 'f':
		return s.literal(out, count, "false")
	case c == 'n':
		return s.literal(out, count, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		if err := s.number(out); err != nil {
			return err
		}
		if count != nil {
			count.Scalar()
		}
		return nil
	}
	return s.fail("not JSON")
}

func (s *scanner) literal(out *replyWriter, count *complexity.ActualCounter, word string) error {
	if !s.fill(len(word)) || string(s.buf[s.r:s.r+len(word)]) != word {
		return s.fail("not JSON")
	}
	s.r += len(word)
	out.WriteString(word)
	if count != nil {
		if word == "null" {
			count.Null()
		} else {
			count.Scalar()
		}
	}
	return nil
}

// number copies a JSON number, checking its grammar. A number is short:
// longer than maxNumber bytes, it is refused.
func (s *scanner) number(out *replyWriter) error {
	s.fill(maxNumber + 1)
	b := s.buf[s.r:s.n]
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return s.fail("a bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return s.fail("a bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return s.fail("a bad number")
		}
	}
	if i > maxNumber {
		return s.fail(fmt.Sprintf("a number longer than %d bytes", maxNumber))
	}
	out.Write(b[:i])
	s.r += i
	return nil
}

// string copies a JSON string to out (nil: a key, not written), keeping
// its decoded text in s.text, up to limit bytes (s.long: it was longer).
func (s *scanner) string(out *replyWriter, limit int) error {
	s.r++ // the opening quote
	s.text, s.long, s.textMax = s.text[:0], false, limit
	out.putByte('"')
	for {
		if !s.fill(1) {
			return s.fail("an unterminated string")
		}
		// The plain run: printable ASCII without quotes or backslashes.
		run := s.r
		for run < s.n && plainASCII[s.buf[run]] {
			run++
		}
		s.keep(s.buf[s.r:run])
		out.Write(s.buf[s.r:run])
		s.r = run
		if run == s.n {
			continue
		}
		switch c := s.buf[s.r]; {
		case c == '"':
			s.r++
			out.putByte('"')
			return nil
		case c == '\\':
			if err := s.escape(out); err != nil {
				return err
			}
		case c < 0x20:
			return s.fail("a control character in a string")
		default:
			s.fill(utf8.UTFMax)
			r, size := utf8.DecodeRune(s.buf[s.r:s.n])
			if r == utf8.RuneError && size == 1 {
				// Not UTF-8: replaced, as encoding/json does.
				s.r++
				s.keep([]byte("\ufffd"))
				out.WriteString("\ufffd")
				continue
			}
			s.keep(s.buf[s.r : s.r+size])
			out.Write(s.buf[s.r : s.r+size])
			s.r += size
		}
	}
}

// plainASCII marks the bytes of a string's plain run.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// keep adds b to the decoded text, up to s.textMax.
func (s *scanner) keep(b []byte) {
	if room := s.textMax - len(s.text); len(b) > room {
		s.long = true
		b = b[:max(room, 0)]
	}
	s.text = append(s.text, b...)
}

// escape copies one escape sequence (\n, \u00e9, a surrogate pair ...) as
// the upstream wrote it, keeping its decoded text.
func (s *scanner) escape(out *replyWriter) error {
	if !s.fill(2) {
		return s.fail("an unterminated string")
	}
	var decoded byte
	switch c := s.buf[s.r+1]; c {
	case '"', '\\', '/':
		decoded = c
	case 'b':
		decoded = '\b'
	case 'f':
		decoded = '\f'
	case 'n':
		decoded = '\n'
	case 'r':
		decoded = '\r'
	case 't':
		decoded = '\t'
	case 'u':
		r, err := s.hex4(out)
		if err != nil {
			return err
		}
		if utf16.IsSurrogate(r) && s.fill(2) && s.buf[s.r] == '\\' && s.buf[s.r+1] == 'u' {
			lo, err := s.hex4(out)
			if err != nil {
				return err
			}
			r = utf16.DecodeRune(r, lo)
		}
		if utf16.IsSurrogate(r) {
			r = utf8.RuneError
		}
		var enc [utf8.UTFMax]byte
		s.keep(enc[:utf8.EncodeRune(enc[:], r)])
		return nil
	default:
		return s.fail("a bad escape in a string")
	}
	one := [1]byte{decoded}
	s.keep(one[:])
	out.Write(s.buf[s.r : s.r+2])
	s.r += 2
	return nil
}

// hex4 copies \uXXXX and returns its code unit.
func (s *scanner) hex4(out *replyWriter) (rune, error) {
	if !s.fill(6) {
		return 0, s.fail("an unterminated string")
	}
	r := jsonkeys.Hex4(s.buf[s.r+2 : s.r+6])
	if r < 0 {
		return 0, s.fail("a bad \\u escape in a string")
	}
	out.Write(s.buf[s.r : s.r+6])
	s.r += 6
	return r, nil
}

// readKey reads an object key into s.key.
func (s *scanner) readKey() error {
	if s.peek() != '"' {
		return s.fail("an object key that is not a string")
	}
	if err := s.string(nil, maxKey); err != nil {
		return err
	}
	if s.long {
		return s.fail(fmt.Sprintf("an object key longer than %d bytes", maxKey))
	}
	s.key = append(s.key[:0], s.text...)
	return nil
}

// colon consumes the colon after a key.
func (s *scanner) colon() error {
	if s.peek() != ':' {
		return s.fail("a key without a value")
	}
	s.r++
	return nil
}

// object copies an object, less its member drop (in data: priced, not
// written).
func (s *scanner) object(out *replyWriter, count *complexity.ActualCounter, depth int, drop string) error {
	if depth >= maxNesting {
		return s.fail(fmt.Sprintf("nested deeper than %d", maxNesting))
	}
	s.r++
	out.putByte('{')
	if count != nil {
		count.BeginObject()
	}
	wrote := false
	if s.peek() == '}' {
		s.r++
	} else {
		for {
			if err := s.readKey(); err != nil {
				return err
			}
			if err := s.colon(); err != nil {
				return err
			}
			dst := out
			if drop != "" && string(s.key) == drop {
				dst = nil
			}
			if dst != nil {
				if wrote {
					out.putByte(',')
				}
				wrote = true
				writeKey(out, s.key)
			}
			if count != nil {
				count.Key(s.key)
			}
			if err := s.value(dst, count, depth+1); err != nil {
				return err
			}
			if c := s.peek(); c == ',' {
				s.r++
				continue
			} else if c == '}' {
				s.r++
				break
			}
			return s.fail("an object not closed")
		}
	}
	out.putByte('}')
	if count != nil {
		count.End()
	}
	return nil
}

func (s *scanner) array(out *replyWriter, count *complexity.ActualCounter, depth int) error {
	if depth >= maxNesting {
		return s.fail(fmt.Sprintf("nested deeper than %d", maxNesting))
	}
	s.r++
	out.putByte('[')
	if count != nil {
		count.BeginArray()
	}
	if s.peek() == ']' {
		s.r++
	} else {
		for i := 0; ; i++ {
			if i > 0 {
				out.putByte(',')
			}
			if err := s.value(out, count, depth+1); err != nil {
				return err
			}
			if c := s.peek(); c == ',' {
				s.r++
				continue
			} else if c == ']' {
				s.r++
				break
			}
			return s.fail("an array not closed")
		}
	}
	out.putByte(']')
	if count != nil {
		count.End()
	}
	return nil
}

// writeKey writes a decoded key as a JSON string and a colon.
func writeKey(out *replyWriter, key []byte) {
	for _, c := range key {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			quoted, _ := json.Marshal(string(key)) // the rare key that needs escapes
			out.Write(quoted)
			out.putByte(':')
			return
		}
	}
	out.putByte('"')
	out.Write(key)
	out.WriteString(`":`)
}

// envelope copies the upstream's reply, a GraphQL response, to out: "data"
// priced by count as it goes, "errors" as they are (each must be an
// object), anything else dropped; "extensions" is copied to ext, less its
// "cost", for the caller to close the answer with its own. It reports
// whether the reply had data. Nothing after it but whitespace.
func (s *scanner) envelope(out *replyWriter, count *complexity.ActualCounter, ext *replyWriter) (bool, error) {
	if s.peek() != '{' {
		return false, s.fail("not a JSON object")
	}
	s.r++
	out.putByte('{')
	var data, nullData, errs, exts, wrote bool
	member := func(name string) {
		if wrote {
			out.putByte(',')
		}
		wrote = true
		out.WriteString(`"` + name + `":`)
	}
	for more := s.peek() != '}'; more; {
		if err := s.readKey(); err != nil {
			return false, err
		}
		if err := s.colon(); err != nil {
			return false, err
		}
		var err error
		switch key := string(s.key); {
		case key == "data" && !data:
			data = true
			c := s.peek()
			if c != '{' && c != 'n' {
				return false, s.fail("data that is not an object")
			}
			nullData = c == 'n'
			member("data")
			err = s.value(out, count, 1)
		case key == "errors" && !errs:
			errs = true
			member("errors")
			err = s.errorList(out)
		case key == "extensions" && !exts:
			exts = true
			if s.peek() != '{' {
				return false, s.fail("extensions that are not an object")
			}
			err = s.object(ext, nil, 1, "cost")
		case key == "data" || key == "errors" || key == "extensions":
			return false, s.fail(key + " twice")
		default:
			err = s.value(nil, nil, 1)
		}
		if err != nil {
			return false, err
		}
		switch s.peek() {
		case ',':
			s.r++
		case '}':
			more = false
		default:
			return false, s.fail("an object not closed")
		}
	}
	s.r++
	if err := s.end(); err != nil {
		return false, err
	}
	if (!data || nullData) && !errs {
		return false, s.fail("neither data nor errors")
	}
	if !data {
		member("data")
		out.WriteString("null")
		count.Null()
	}
	return data, nil
}

// errorList copies "errors": an array of objects.
func (s *scanner) errorList(out *replyWriter) error {
	if s.peek() != '[' {
		return s.fail("errors that are not a list")
	}
	s.r++
	out.putByte('[')
	for more := s.peek() != ']'; more; {
		if s.peek() != '{' {
			return s.fail("an error that is not an object")
		}
		var err error
		if len(s.inserted) > 0 {
			err = s.errorObject(out)
		} else {
			err = s.object(out, nil, 2, "")
		}
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.r++
			out.putByte(',')
		case ']':
			more = false
		default:
			return s.fail("an array not closed")
		}
	}
	s.r++
	out.putByte(']')
	return nil
}

// errorObject copies an error, its "locations" moved back into the client's
// document (see clientColumn).
func (s *scanner) errorObject(out *replyWriter) error {
	s.r++
	out.putByte('{')
	for more, wrote := s.peek() != '}', false; more; wrote = true {
		if err := s.readKey(); err != nil {
			return err
		}
		if err := s.colon(); err != nil {
			return err
		}
		if wrote {
			out.putByte(',')
		}
		writeKey(out, s.key)
		var err error
		if string(s.key) == "locations" {
			err = s.locations(out)
		} else {
			err = s.value(out, nil, 3)
		}
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.r++
		case '}':
			more = false
		default:
			return s.fail("an object not closed")
		}
	}
	s.r++
	out.putByte('}')
	return nil
}

// locations copies an error's locations, each column moved back by what the
// proxy inserted before it on its line. Locations of another shape pass as
// they are.
func (s *scanner) locations(out *replyWriter) error {
	held := &replyWriter{max: maxLocations}
	defer held.release()
	if err := s.value(held, nil, 3); err != nil {
		return err
	}
	if held.err != nil {
		return s.fail("error locations longer than 64 KiB")
	}
	var locs []map[string]any
	dec := json.NewDecoder(bytes.NewReader(held.pending))
	dec.UseNumber()
	if dec.Decode(&locs) != nil {
		out.Write(held.pending)
		return nil
	}
	for _, loc := range locs {
		line, lerr := jsonInt(loc["line"])
		column, cerr := jsonInt(loc["column"])
		if lerr == nil && cerr == nil {
			loc["column"] = clientColumn(s.inserted, line, column)
		}
	}
	moved, err := json.Marshal(locs)
	if err != nil {
		out.Write(held.pending)
		return nil
	}
	out.Write(moved)
	return nil
}

func jsonInt(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	i, err := n.Int64()
	return int(i), err
}

// closeAnswer ends the answer with "extensions": the upstream's (ext), and
// cost.
func closeAnswer(out, ext *replyWriter, cost any) {
	out.WriteString(`,"extensions":`)
	if upstream := ext.pending; len(upstream) > 2 {
		out.Write(upstream[:len(upstream)-1])
		out.putByte(',')
	} else {
		out.putByte('{')
	}
	raw, _ := json.Marshal(cost)
	out.WriteString(`"cost":`)
	out.Write(raw)
	out.WriteString("}}\n")
}
