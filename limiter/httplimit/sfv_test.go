package httplimit_test

import (
	"fmt"
	"strconv"
)

// A strict parser of RFC 8941 lists of items with parameters, enough to
// check RateLimit-Policy and RateLimit: sf-string, sf-integer, sf-token and
// sf-boolean bare items. It rejects anything the RFC's parsing algorithm
// (section 4.2) rejects for these types.

type sfParam struct {
	key   string
	value any // int64, string (sf-string), sfToken, bool
}

type sfToken string

type sfItem struct {
	value  any
	params []sfParam
}

type sfParser struct {
	s   string
	pos int
}

func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var items []sfItem
	for p.pos < len(p.s) {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skipOWS()
		if p.pos == len(p.s) {
			return items, nil
		}
		if p.s[p.pos] != ',' {
			return nil, fmt.Errorf("at %d: want ',' after a list member, got %q", p.pos, p.s[p.pos])
		}
		p.pos++
		p.skipOWS()
		if p.pos == len(p.s) {
			return nil, fmt.Errorf("trailing comma")
		}
	}
	return items, nil
}

func (p *sfParser) skipSP() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{value: v}
	for p.pos < len(p.s) && p.s[p.pos] == ';' {
		p.pos++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var val any = true
		if p.pos < len(p.s) && p.s[p.pos] == '=' {
			p.pos++
			if val, err = p.bareItem(); err != nil {
				return sfItem{}, err
			}
		}
		it.params = append(it.params, sfParam{key, val})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.pos
	if p.pos >= len(p.s) || !(isLCAlpha(p.s[p.pos]) || p.s[p.pos] == '*') {
		return "", fmt.Errorf("at %d: bad parameter key", p.pos)
	}
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.pos++
	}
	return p.s[start:p.pos], nil
}

func (p *sfParser) bareItem() (any, error) {
	if p.pos >= len(p.s) {
		return nil, fmt.Errorf("at %d: want an item, got the end", p.pos)
	}
	switch c := p.s[p.pos]; {
	case c == '-' || isDigit(c):
		return p.integer()
	case c == '"':
		return p.str()
	case c == '?':
		if p.pos+1 < len(p.s) && (p.s[p.pos+1] == '0' || p.s[p.pos+1] == '1') {
			p.pos += 2
			return p.s[p.pos-1] == '1', nil
		}
		return nil, fmt.Errorf("at %d: bad boolean", p.pos)
	case isAlpha(c) || c == '*':
		start := p.pos
		for p.pos < len(p.s) && (isTChar(p.s[p.pos]) || p.s[p.pos] == ':' || p.s[p.pos] == '/') {
			p.pos++
		}
		return sfToken(p.s[start:p.pos]), nil
	default:
		return nil, fmt.Errorf("at %d: unexpected %q", p.pos, c)
	}
}

func (p *sfParser) integer() (int64, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
		p.pos++
	}
	if n := p.pos - digits; n == 0 || n > 15 {
		return 0, fmt.Errorf("at %d: an integer has 1 to 15 digits", start)
	}
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		return 0, fmt.Errorf("at %d: decimals are not expected here", start)
	}
	return strconv.ParseInt(p.s[start:p.pos], 10, 64)
}

func (p *sfParser) str() (string, error) {
	p.pos++ // opening quote
	var b []byte
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == '\\':
			if p.pos >= len(p.s) || (p.s[p.pos] != '"' && p.s[p.pos] != '\\') {
				return "", fmt.Errorf("at %d: bad escape", p.pos)
			}
			b = append(b, p.s[p.pos])
			p.pos++
		case c == '"':
			return string(b), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("at %d: byte %#x in a string", p.pos-1, c)
		default:
			b = append(b, c)
		}
	}
	return "", fmt.Errorf("unterminated string")
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || c > 0x20 && c < 0x7f && !isDelimiter(c)
}
func isDelimiter(c byte) bool {
	for _, d := range []byte(`"(),/:;<=>?@[\]{}`) {
		if c == d {
			return true
		}
	}
	return false
}
