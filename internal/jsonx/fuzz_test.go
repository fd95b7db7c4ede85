package jsonx_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/toolsd/toolsd/internal/jsonx"
)

// FuzzDecode checks jsonx against encoding/json: whatever jsonx accepts, encoding/json
// accepts with the same value; whatever encoding/json accepts, jsonx may only refuse for
// a strictness reason (duplicates, UTF-8, depth), never as a syntax error; Decode and
// Valid always agree, on bytes and on the same text as a string. Seeds live in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	lim := jsonx.Limits{MaxBytes: 1 << 16, MaxDepth: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := jsonx.Decode(data, lim)
		validErr := jsonx.Valid(data, lim)
		if (err == nil) != (validErr == nil) {
			t.Fatalf("Decode(%q) = %v but Valid = %v", data, err, validErr)
		}
		gotS, errS := jsonx.Decode(string(data), lim)
		validErrS := jsonx.Valid(string(data), lim)
		if !reflect.DeepEqual(got, gotS) || fmt.Sprint(err) != fmt.Sprint(errS) || fmt.Sprint(validErr) != fmt.Sprint(validErrS) {
			t.Fatalf("%q: bytes give (%#v, %v, %v), a string gives (%#v, %v, %v)", data, got, err, validErr, gotS, errS, validErrS)
		}
		if err != nil {
			var je *jsonx.Error
			if !errors.As(err, &je) || je.Offset < 0 || je.Offset > int64(len(data)) && !errors.Is(err, jsonx.ErrTooLarge) {
				t.Fatalf("Decode(%q) = %#v, want *jsonx.Error with an in-range offset", data, err)
			}
			if validErr.Error() != err.Error() {
				t.Fatalf("Decode(%q) = %v but Valid = %v, want the same error", data, err, validErr)
			}
		}

		var want any
		var stdErr error
		if !json.Valid(data) {
			stdErr = errors.New("encoding/json: invalid")
		} else {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			stdErr = dec.Decode(&want)
		}
		switch {
		case err == nil && stdErr != nil:
			t.Fatalf("Decode(%q) accepted what encoding/json rejects: %v", data, stdErr)
		case err == nil:
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("Decode(%q) = %#v, encoding/json decodes %#v", data, got, want)
			}
		case stdErr == nil && errors.Is(err, jsonx.ErrSyntax):
			t.Fatalf("Decode(%q) = %v, but encoding/json accepts it", data, err)
		}
	})
}
