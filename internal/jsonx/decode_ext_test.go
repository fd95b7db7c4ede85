package jsonx_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/jsonx"
)

func TestDecodeAccepts(t *testing.T) {
	tests := map[string]struct {
		in   string
		want any
	}{
		"object": {
			in:   `{"path":"/tmp/x","offset":0,"limit":-1.5e3,"recursive":true,"tags":["a","b"],"opt":null}`,
			want: map[string]any{"path": "/tmp/x", "offset": json.Number("0"), "limit": json.Number("-1.5e3"), "recursive": true, "tags": []any{"a", "b"}, "opt": nil},
		},
		"surrounding whitespace":  {in: " \t\r\n{} \n", want: map[string]any{}},
		"empty array":             {in: `[]`, want: []any{}},
		"nested empty":            {in: `[{},[]]`, want: []any{map[string]any{}, []any{}}},
		"scalar string":           {in: `"x"`, want: "x"},
		"false":                   {in: `false`, want: false},
		"null":                    {in: `null`, want: nil},
		"big number is lossless":  {in: `12345678901234567890123`, want: json.Number("12345678901234567890123")},
		"precise float":           {in: `0.1000000000000000055511151231257827`, want: json.Number("0.1000000000000000055511151231257827")},
		"exponent forms":          {in: `[1E5,1e+5,1e-5,0.5]`, want: []any{json.Number("1E5"), json.Number("1e+5"), json.Number("1e-5"), json.Number("0.5")}},
		"float64 extremes":        {in: `[1.7976931348623157e308,5e-324,1e400,1e-400]`, want: []any{json.Number("1.7976931348623157e308"), json.Number("5e-324"), json.Number("1e400"), json.Number("1e-400")}},
		"escapes":                 {in: `"a\"b\\c\/d\b\f\n\r\t"`, want: "a\"b\\c/d\b\f\n\r\t"},
		"unicode escape":          {in: `"\u00e9\u4e2d"`, want: "é中"},
		"surrogate pair":          {in: `"\ud83d\ude00"`, want: "😀"},
		"raw multibyte":           {in: `"é中😀"`, want: "é中😀"},
		"NUL escape":              {in: `"\u0000"`, want: "\x00"},
		"same key in siblings":    {in: `[{"a":1},{"a":2}]`, want: []any{map[string]any{"a": json.Number("1")}, map[string]any{"a": json.Number("2")}}},
		"same key nested":         {in: `{"a":{"a":1}}`, want: map[string]any{"a": map[string]any{"a": json.Number("1")}}},
		"depth exactly at limit":  {in: strings.Repeat("[", 64) + strings.Repeat("]", 64), want: nest(64)},
		"escaped key":             {in: `{"a\nb":1}`, want: map[string]any{"a\nb": json.Number("1")}},
		"many keys (set path)":    {in: manyKeys(40, ""), want: manyKeysValue(40)},
		"escaped keys (set path)": {in: `{"\u0061":1,"b":2}`, want: map[string]any{"a": json.Number("1"), "b": json.Number("2")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := jsonx.Decode([]byte(tc.in), jsonx.Limits{})
			if err != nil {
				t.Fatalf("Decode(%q) error = %v, want nil", tc.in, err)
			}
			if !reflect.DeepEqual(tc.want, got) {
				t.Errorf("Decode(%q) mismatch (-want +got):\n%s", tc.in, cmp.Diff(tc.want, got))
			}
			if err := jsonx.Valid([]byte(tc.in), jsonx.Limits{}); err != nil {
				t.Errorf("Valid(%q) = %v, want nil", tc.in, err)
			}
			gotS, err := jsonx.Decode(tc.in, jsonx.Limits{})
			if err != nil || !reflect.DeepEqual(tc.want, gotS) {
				t.Errorf("Decode(string %q) = %#v, %v, want what Decode of its bytes gives", tc.in, gotS, err)
			}
			if err := jsonx.Valid(tc.in, jsonx.Limits{}); err != nil {
				t.Errorf("Valid(string %q) = %v, want nil", tc.in, err)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := map[string]struct {
		in      string
		lim     jsonx.Limits
		want    error
		offset  int64
		message string
	}{
		"empty":                  {in: ``, want: jsonx.ErrSyntax, offset: 0, message: "jsonx: empty input at offset 0"},
		"whitespace only":        {in: "  \n", want: jsonx.ErrSyntax, offset: 3},
		"duplicate key":          {in: `{"a":1,"b":2,"a":3}`, want: jsonx.ErrDuplicateKey, offset: 13, message: `jsonx: duplicate key "a" at offset 13`},
		"duplicate after escape": {in: `{"a":1,"\u0061":2}`, want: jsonx.ErrDuplicateKey, offset: 7},
		"duplicate nested":       {in: `[{"x":{"k":1,"k":2}}]`, want: jsonx.ErrDuplicateKey, offset: 13},
		"duplicate in big obj":   {in: manyKeys(40, "k5"), want: jsonx.ErrDuplicateKey},
		"too deep":               {in: strings.Repeat("[", 65) + strings.Repeat("]", 65), want: jsonx.ErrTooDeep, offset: 64, message: "jsonx: nesting deeper than 64 at offset 64"},
		"too deep custom":        {in: `{"a":{"b":{}}}`, lim: jsonx.Limits{MaxDepth: 2}, want: jsonx.ErrTooDeep, offset: 10},
		"too large":              {in: `"0123456789"`, lim: jsonx.Limits{MaxBytes: 8}, want: jsonx.ErrTooLarge, offset: 8},
		"trailing data":          {in: `{} {}`, want: jsonx.ErrSyntax, offset: 3},
		"trailing garbage":       {in: `truex`, want: jsonx.ErrSyntax, offset: 4},
		"invalid utf8 in string": {in: "\"a\xffb\"", want: jsonx.ErrInvalidUTF8, offset: 2},
		"invalid utf8 in key":    {in: "{\"\xc3\x28\":1}", want: jsonx.ErrInvalidUTF8, offset: 2},
		"invalid utf8 outside":   {in: "[1,\xff]", want: jsonx.ErrInvalidUTF8, offset: 3},
		"utf8 surrogate bytes":   {in: "\"\xed\xa0\x80\"", want: jsonx.ErrInvalidUTF8, offset: 1},
		"invalid utf8 after esc": {in: "\"\\n\xff\"", want: jsonx.ErrInvalidUTF8, offset: 3},
		"lone high surrogate":    {in: `"\ud800"`, want: jsonx.ErrInvalidUTF8, offset: 1},
		"lone low surrogate":     {in: `"\udc00x"`, want: jsonx.ErrInvalidUTF8, offset: 1},
		"high then non-low":      {in: `"\ud800\u0041"`, want: jsonx.ErrInvalidUTF8, offset: 1},
		"valid rune outside":     {in: `é`, want: jsonx.ErrSyntax, offset: 0},
		"control char":           {in: "\"a\nb\"", want: jsonx.ErrSyntax, offset: 2},
		"bad escape":             {in: `"\x"`, want: jsonx.ErrSyntax, offset: 2},
		"bad hex":                {in: `"\u12g4"`, want: jsonx.ErrSyntax, offset: 5},
		"unterminated string":    {in: `"abc`, want: jsonx.ErrSyntax, offset: 4},
		"unterminated object":    {in: `{"a":1`, want: jsonx.ErrSyntax, offset: 6},
		"trailing comma object":  {in: `{"a":1,}`, want: jsonx.ErrSyntax, offset: 7},
		"trailing comma array":   {in: `[1,]`, want: jsonx.ErrSyntax, offset: 3},
		"single quotes":          {in: `{'a':1}`, want: jsonx.ErrSyntax, offset: 1},
		"unquoted key":           {in: `{a:1}`, want: jsonx.ErrSyntax, offset: 1},
		"missing colon":          {in: `{"a" 1}`, want: jsonx.ErrSyntax, offset: 5},
		"leading zero":           {in: `01`, want: jsonx.ErrSyntax, offset: 1},
		"plus sign":              {in: `+1`, want: jsonx.ErrSyntax, offset: 0},
		"bare minus":             {in: `-`, want: jsonx.ErrSyntax, offset: 1},
		"dot without digits":     {in: `1.`, want: jsonx.ErrSyntax, offset: 2},
		"exponent without digit": {in: `1e+`, want: jsonx.ErrSyntax, offset: 3},
		"NaN":                    {in: `NaN`, want: jsonx.ErrSyntax, offset: 0},
		"bad literal":            {in: `nul`, want: jsonx.ErrSyntax, offset: 3},
		"comment":                {in: `{} // x`, want: jsonx.ErrSyntax, offset: 3},
		"huge exponent":          {in: `[1e999999]`, want: jsonx.ErrNumberRange, offset: 1, message: "jsonx: exponent beyond ±400 in numeric literal at offset 1"},
		"huge negative exponent": {in: `[1E-401]`, want: jsonx.ErrNumberRange, offset: 1},
		"exponent overflows int": {in: `1e99999999999999999999999`, want: jsonx.ErrNumberRange, offset: 0},
		"long integer":           {in: `{"n":` + strings.Repeat("9", 129) + `}`, want: jsonx.ErrNumberRange, offset: 5},
		"long zero-led exponent": {in: `1e` + strings.Repeat("0", 127) + `1`, want: jsonx.ErrNumberRange, offset: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for fn, run := range map[string]func(string, jsonx.Limits) error{
				"Decode":        func(s string, l jsonx.Limits) error { _, err := jsonx.Decode([]byte(s), l); return err },
				"Decode/string": func(s string, l jsonx.Limits) error { _, err := jsonx.Decode(s, l); return err },
				"Valid":         func(s string, l jsonx.Limits) error { return jsonx.Valid([]byte(s), l) },
				"Valid/string":  jsonx.Valid[string],
			} {
				err := run(tc.in, tc.lim)
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s(%q) = %v, want %v", fn, tc.in, err, tc.want)
				}
				var je *jsonx.Error
				if !errors.As(err, &je) {
					t.Fatalf("%s(%q) = %T, want *jsonx.Error", fn, tc.in, err)
				}
				if tc.offset != 0 && je.Offset != tc.offset {
					t.Errorf("%s(%q) offset = %d, want %d (%v)", fn, tc.in, je.Offset, tc.offset, err)
				}
				if tc.message != "" && err.Error() != tc.message {
					t.Errorf("%s(%q) message = %q, want %q", fn, tc.in, err.Error(), tc.message)
				}
				if !strings.HasPrefix(err.Error(), "jsonx: ") {
					t.Errorf("%s(%q) message = %q, want jsonx: prefix", fn, tc.in, err.Error())
				}
			}
		})
	}
}

func TestErrorMessageCapsLongKeys(t *testing.T) {
	k := strings.Repeat("k", 500)
	_, err := jsonx.Decode([]byte(`{"`+k+`":1,"`+k+`":2}`), jsonx.Limits{})
	if !errors.Is(err, jsonx.ErrDuplicateKey) {
		t.Fatalf("Decode(dup long key) = %v, want ErrDuplicateKey", err)
	}
	if n := len(err.Error()); n > 120 {
		t.Errorf("Decode(dup long key) message has %d bytes, want <= 120: %q", n, err)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	tests := map[string]struct {
		in, want jsonx.Limits
	}{
		"zero":     {in: jsonx.Limits{}, want: jsonx.Limits{MaxBytes: 1 << 20, MaxDepth: 64}},
		"negative": {in: jsonx.Limits{MaxBytes: -1, MaxDepth: -1}, want: jsonx.Limits{MaxBytes: 1 << 20, MaxDepth: 64}},
		"kept":     {in: jsonx.Limits{MaxBytes: 10, MaxDepth: 3}, want: jsonx.Limits{MaxBytes: 10, MaxDepth: 3}},
		"capped":   {in: jsonx.Limits{MaxBytes: 10, MaxDepth: 1 << 30}, want: jsonx.Limits{MaxBytes: 10, MaxDepth: 10000}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.WithDefaults(); got != tc.want {
				t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestValidDoesNotAllocate pins the fast path: checking a typical provider result
// builds nothing.
func TestValidDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	doc := []byte(benchDoc)
	allocs := testing.AllocsPerRun(100, func() {
		if err := jsonx.Valid(doc, jsonx.Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Valid(benchDoc) allocs = %v, want 0", allocs)
	}
}

// TestDecodeStringSharesItsText pins why Decode takes a string: a string value in a
// decoded string is a substring of the input, so a 64 KiB argument is not copied. Decoding
// its bytes costs one copy.
func TestDecodeStringSharesItsText(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	const n = 64 << 10
	doc := `{"data":"` + strings.Repeat("x", n) + `"}`
	bytesPerRun := func(decode func() (any, error)) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := decode(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	fromString := bytesPerRun(func() (any, error) { return jsonx.Decode(doc, jsonx.Limits{MaxBytes: 2 * n}) })
	docBytes := []byte(doc)
	fromBytes := bytesPerRun(func() (any, error) { return jsonx.Decode(docBytes, jsonx.Limits{MaxBytes: 2 * n}) })
	if fromString >= n/2 {
		t.Errorf("Decode of a %d-byte string allocated %d bytes a run, want it to share the text", len(doc), fromString)
	}
	if fromBytes < n {
		t.Errorf("Decode of %d bytes allocated %d bytes a run, want one copy of them", len(doc), fromBytes)
	}
}

func nest(n int) any {
	if n == 0 {
		return nil
	}
	inner := nest(n - 1)
	if inner == nil {
		return []any{}
	}
	return []any{inner}
}

// manyKeys builds an object with n keys k0..k(n-1), plus dup again at the end when non-empty.
func manyKeys(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + itoa(i) + `":` + itoa(i))
	}
	if dup != "" {
		b.WriteString(`,"` + dup + `":0`)
	}
	b.WriteString("}")
	return b.String()
}

func manyKeysValue(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m["k"+itoa(i)] = json.Number(itoa(i))
	}
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestDescribe: Describe words a rejection without the package prefix, for messages
// whose reader never heard of jsonx; other errors read as they are.
func TestDescribe(t *testing.T) {
	_, err := jsonx.Decode(`{"a":1,"a":2}`, jsonx.Limits{})
	if got, want := jsonx.Describe(err), `duplicate key "a" at offset 7`; got != want {
		t.Errorf("Describe(%v) = %q, want %q", err, got, want)
	}
	other := errors.New("something else")
	if got := jsonx.Describe(other); got != other.Error() {
		t.Errorf("Describe(%v) = %q, want it as it reads", other, got)
	}
}
