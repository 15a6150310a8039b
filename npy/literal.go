package npy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyTuple and pyList are parsed Python sequences; pyDict keeps key order.
type (
	pyTuple []any
	pyList  []any
	pyDict  []pyItem
	pyNone  struct{}
)

type pyItem struct {
	key any
	val any
}

// maxDepth bounds literal nesting, so hostile headers cannot exhaust the
// stack.
const maxDepth = 32

// parseLiteral parses s as one Python literal made of dicts, tuples, lists,
// strings, integers, True, False and None, surrounded by optional
// whitespace. Integers are int64 (a Python 2 "L" suffix is accepted).
func parseLiteral(s string) (any, error) {
	p := &litParser{s: s}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return nil, p.errorf("trailing characters %q", clip(p.s[p.i:]))
	}
	return v, nil
}

type litParser struct {
	s string
	i int
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

func (p *litParser) errorf(format string, args ...any) error {
	return fmt.Errorf("header offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *litParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			p.i++
		default:
			return
		}
	}
}

func (p *litParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *litParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf("literal nested too deeply")
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of header")
	}
	c := p.s[p.i]
	switch {
	case c == '{':
		return p.dict(depth)
	case c == '(':
		p.i++
		items, trailingComma, err := p.seq(')', depth)
		if err != nil {
			return nil, err
		}
		if len(items) == 1 && !trailingComma {
			return items[0], nil // parenthesised expression, not a tuple
		}
		return pyTuple(items), nil
	case c == '[':
		p.i++
		items, _, err := p.seq(']', depth)
		if err != nil {
			return nil, err
		}
		return pyList(items), nil
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.int()
	case isIdentStart(c):
		j := p.i
		for j < len(p.s) && (isIdentStart(p.s[j]) || (p.s[j] >= '0' && p.s[j] <= '9')) {
			j++
		}
		word := p.s[p.i:j]
		switch word {
		case "True":
			p.i = j
			return true, nil
		case "False":
			p.i = j
			return false, nil
		case "None":
			p.i = j
			return pyNone{}, nil
		}
		return nil, p.errorf("unsupported name %q in header (only literals are allowed)", clip(word))
	}
	return nil, p.errorf("unexpected character %q", c)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// seq parses comma-separated values up to close (the opening bracket is
// already consumed). It reports whether the last item was followed by a
// comma.
func (p *litParser) seq(close byte, depth int) ([]any, bool, error) {
	var items []any
	trailing := false
	for {
		p.skipSpace()
		if p.peek() == close {
			p.i++
			return items, trailing, nil
		}
		if len(items) > 0 && !trailing {
			return nil, false, p.errorf("expected ',' or %q", close)
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, false, err
		}
		items = append(items, v)
		p.skipSpace()
		trailing = false
		if p.peek() == ',' {
			p.i++
			trailing = true
		}
	}
}

func (p *litParser) dict(depth int) (any, error) {
	p.i++ // '{'
	var d pyDict
	for {
		p.skipSpace()
		if p.peek() == '}' {
			p.i++
			return d, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch k.(type) {
		case string, int64, bool, pyNone:
		default:
			return nil, p.errorf("unhashable dict key")
		}
		p.skipSpace()
		if p.peek() != ':' {
			return nil, p.errorf("expected ':' after dict key")
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d = append(d, pyItem{k, v})
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		default:
			return nil, p.errorf("expected ',' or '}' in dict")
		}
	}
}

func (p *litParser) int() (any, error) {
	j := p.i
	if p.s[j] == '-' || p.s[j] == '+' {
		j++
	}
	start := j
	for j < len(p.s) && ((p.s[j] >= '0' && p.s[j] <= '9') || p.s[j] == '_') {
		j++
	}
	if j == start {
		return nil, p.errorf("malformed number")
	}
	if j < len(p.s) && (p.s[j] == '.' || p.s[j] == 'e' || p.s[j] == 'E' || p.s[j] == 'x' || p.s[j] == 'X' || p.s[j] == 'j') {
		return nil, p.errorf("only decimal integers are supported in the header")
	}
	text := p.s[p.i:j]
	if j < len(p.s) && (p.s[j] == 'L' || p.s[j] == 'l') { // Python 2 long
		j++
	}
	body := strings.TrimLeft(text, "+-")
	if strings.HasPrefix(body, "_") || strings.HasSuffix(body, "_") || strings.Contains(body, "__") {
		return nil, p.errorf("malformed number %q", clip(text))
	}
	digits := strings.ReplaceAll(text, "_", "")
	if body := strings.TrimLeft(digits, "+-"); len(body) > 1 && body[0] == '0' && strings.Trim(body, "0") != "" {
		return nil, p.errorf("leading zeros in integer %q", clip(text))
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return nil, p.errorf("integer %q out of range", clip(text))
	}
	p.i = j
	return n, nil
}

func (p *litParser) str() (any, error) {
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), nil
		case c == '\n':
			return nil, p.errorf("newline in string")
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return nil, p.errorf("unterminated string")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.i+n > len(p.s) {
					return nil, p.errorf("short \\%c escape", e)
				}
				v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil || v > math.MaxInt32 || !utf8.ValidRune(rune(v)) {
					return nil, p.errorf("bad \\%c escape", e)
				}
				b.WriteRune(rune(v))
				p.i += n
			default:
				// Python keeps unknown escapes verbatim.
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
}
