package jsonx

import (
	"encoding/json"
	"strconv"
	"sync"
)

// Text is what jsonx parses: a document's bytes or the same text as a string.
type Text interface{ ~string | ~[]byte }

// input is what the parser reads: a string, or bytes ([Valid] checks them in place).
type input interface{ string | []byte }

// Decode parses data as exactly one strict JSON value. Objects decode as map[string]any,
// arrays as []any (never nil), numbers as [json.Number], strings as string, booleans as
// bool and null as nil. Any rejection is an [*Error].
//
// Strings and numbers in the value are substrings of one string holding the input: for
// a string input that is the input itself, so a large argument is not copied; bytes are
// copied into a string once.
func Decode[T Text](data T, lim Limits) (any, error) {
	if err := sizeError(len(data), lim.WithDefaults()); err != nil {
		return nil, err // before copying bytes that are too many
	}
	p := getParser[string](true)
	defer putParser(p)
	return p.run(string(data), lim)
}

// Valid applies every check of [Decode] without building the value: it allocates
// nothing for typical documents and is the fast path for checking provider results.
func Valid[T string | []byte](data T, lim Limits) error {
	p := getParser[T](false)
	defer putParser(p)
	_, err := p.run(data, lim)
	return err
}

// parsers recycles parsers, one pool for each kind of input, so their key stack and
// unescape buffer are reused: Valid allocates nothing for typical documents.
var (
	stringParsers = sync.Pool{New: func() any { return new(parser[string]) }}
	byteParsers   = sync.Pool{New: func() any { return new(parser[[]byte]) }}
)

// maxPooledBuffer bounds the buffers a pooled parser keeps between uses.
const maxPooledBuffer = 64 << 10

func poolOf[T input]() *sync.Pool {
	var zero T
	if _, ok := any(zero).(string); ok {
		return &stringParsers
	}
	return &byteParsers
}

func getParser[T input](build bool) *parser[T] {
	p := poolOf[T]().Get().(*parser[T])
	p.build = build
	return p
}

func putParser[T input](p *parser[T]) {
	clear(p.keys[:cap(p.keys)]) // drop references into the last input
	keys, scratch := p.keys[:0], p.scratch[:0]
	if cap(keys) > maxPooledBuffer/16 {
		keys = nil
	}
	if cap(scratch) > maxPooledBuffer {
		scratch = nil
	}
	*p = parser[T]{keys: keys, scratch: scratch}
	poolOf[T]().Put(p)
}

// parser is a recursive-descent parser over a string or bytes; recursion depth is
// bounded by maxDepth. Decode parses strings only.
type parser[T input] struct {
	data     T
	pos      int
	depth    int
	maxDepth int
	// build selects Decode (build values) over Valid (check only).
	build bool
	// keys holds, in Valid mode, the keys of every open object, innermost last.
	keys []T
	// src is, in Decode mode, the input as a string: unescaped strings and numbers are
	// substrings of it, which saves an allocation per value.
	src string
	// scratch is reused to unescape strings.
	scratch []byte
}

func (p *parser[T]) run(data T, lim Limits) (any, error) {
	lim = lim.WithDefaults()
	if err := sizeError(len(data), lim); err != nil {
		return nil, err
	}
	p.data, p.maxDepth = data, lim.MaxDepth
	if p.build {
		p.src = string(data)
	}
	p.skipWS()
	if p.pos == len(data) {
		return nil, newError(ErrSyntax, p.pos, "empty input")
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos != len(data) {
		return nil, p.unexpected("after top-level value")
	}
	return v, nil
}

// sizeError refuses an input of n bytes over lim's MaxBytes (lim has its defaults).
func sizeError(n int, lim Limits) error {
	if n <= lim.MaxBytes {
		return nil
	}
	return newError(ErrTooLarge, lim.MaxBytes,
		"input of "+strconv.Itoa(n)+" bytes exceeds the limit of "+strconv.Itoa(lim.MaxBytes))
}

func (p *parser[T]) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value starting at p.pos (whitespace already skipped).
func (p *parser[T]) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.unexpected("looking for beginning of value")
	}
	switch c := p.data[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		start, end, escaped, err := p.scanString()
		if err != nil || !p.build {
			return nil, err
		}
		return p.str(start, end, escaped), nil
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
		return nil, p.unexpected("looking for beginning of value")
	}
}

func (p *parser[T]) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return newError(ErrTooDeep, p.pos, "nesting deeper than "+strconv.Itoa(p.maxDepth))
	}
	return nil
}

func (p *parser[T]) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	var m map[string]any
	if p.build {
		m = make(map[string]any)
	}
	keys := objectKeys{base: len(p.keys)}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return m, nil
	}
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.unexpected("looking for beginning of object key string")
		}
		keyOff := p.pos
		start, end, escaped, err := p.scanString()
		if err != nil {
			return nil, err
		}
		var key string
		if p.build {
			key = p.str(start, end, escaped)
			if _, dup := m[key]; dup {
				return nil, newError(ErrDuplicateKey, keyOff, "duplicate key "+quoteKey(key))
			}
		} else {
			kb := p.data[start:end]
			if escaped {
				kb = T(string(p.scratch)) // scratch is reused by the next string
			}
			if !p.addKey(&keys, kb) {
				return nil, newError(ErrDuplicateKey, keyOff, "duplicate key "+quoteKey(string(kb)))
			}
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.unexpected("after object key")
		}
		p.pos++
		p.skipWS()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			m[key] = v
		}
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.unexpected("after object key:value pair")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case '}':
			p.pos++
			p.depth--
			p.keys = p.keys[:keys.base]
			return m, nil
		default:
			return nil, p.unexpected("after object key:value pair")
		}
	}
}

// objectKeys tracks the keys of one open object in Valid mode: a linear scan over the
// shared key stack while the object is small, a set once it grows.
type objectKeys struct {
	base int
	set  map[string]struct{}
}

// linearKeys is the object size up to which duplicate detection scans linearly.
const linearKeys = 16

func (p *parser[T]) addKey(o *objectKeys, k T) bool {
	if o.set != nil {
		if _, dup := o.set[string(k)]; dup {
			return false
		}
		o.set[string(k)] = struct{}{}
		return true
	}
	open := p.keys[o.base:]
	for _, prev := range open {
		if string(prev) == string(k) {
			return false
		}
	}
	if len(open) < linearKeys {
		p.keys = append(p.keys, k)
		return true
	}
	o.set = make(map[string]struct{}, 2*linearKeys)
	for _, prev := range open {
		o.set[string(prev)] = struct{}{}
	}
	o.set[string(k)] = struct{}{}
	return true
}

func (p *parser[T]) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	var a []any
	if p.build {
		a = make([]any, 0, 4)
	}
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return a, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			a = append(a, v)
		}
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.unexpected("after array element")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipWS()
		case ']':
			p.pos++
			p.depth--
			return a, nil
		default:
			return nil, p.unexpected("after array element")
		}
	}
}

func (p *parser[T]) literal(lit string, v any) (any, error) {
	for i := 0; i < len(lit); i++ {
		if p.pos >= len(p.data) || p.data[p.pos] != lit[i] {
			return nil, p.unexpected("in literal " + lit)
		}
		p.pos++
	}
	return v, nil
}

func (p *parser[T]) number() (any, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i+1)
	default:
		p.pos = i
		return nil, p.unexpected("in numeric literal")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return nil, p.unexpected("after decimal point in numeric literal")
		}
		i = digits(d, i+1)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return nil, p.unexpected("in exponent of numeric literal")
		}
		e := i
		i = digits(d, i+1)
		if exp, err := strconv.Atoi(string(d[e:i])); err != nil || exp > MaxExponent {
			return nil, newError(ErrNumberRange, start, "exponent beyond ±"+strconv.Itoa(MaxExponent)+" in numeric literal")
		}
	}
	if i-start > MaxNumberLen {
		return nil, newError(ErrNumberRange, start, "numeric literal longer than "+strconv.Itoa(MaxNumberLen)+" bytes")
	}
	p.pos = i
	if !p.build {
		return nil, nil
	}
	return json.Number(p.src[start:i]), nil
}

// str returns a scanned string's content in Decode mode.
func (p *parser[T]) str(start, end int, escaped bool) string {
	if escaped {
		return string(p.scratch)
	}
	return p.src[start:end]
}

func digits[T input](d T, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}
