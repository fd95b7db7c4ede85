package provider

import (
	"encoding/json"
	"reflect"
	"testing"
)

type foldArgs struct {
	Text  string              `json:"text"`
	Key   int                 `json:"key,omitempty"`
	Items []foldArgs          `json:"items,omitempty"`
	ByKey map[string]foldArgs `json:"by_key,omitempty"`
	Any   any                 `json:"any,omitempty"`
	Slash string              `json:"a/b,omitempty"`
}

// FuzzCaseOnlyKeys checks that keyCheck's look at the text misses no key that
// caseOnlyKeys's walk finds and, for JSON objects, that hiding the keys that name a field
// in case only leaves valid JSON, that the hidden doc has none left, and that every
// field then decodes from the member named exactly like it, as a case-sensitive
// decoder (and JSON Schema) reads it.
func FuzzCaseOnlyKeys(f *testing.F) {
	for _, seed := range []string{
		`{"text":"a","TEXT":"b"}`, `{"Text":"b","text":"a"}`, `{"text":"a","\u212aey":1}`,
		`{"items":[{"text":"x","tExt":"y"}],"by_key":{"K":{"KEY":3}}}`, `{"\u0054ext":"b", "any":{"Text":1}}`,
		`{"text":"a","n":1e400,"TEXT":"b"}`, `{ "key" : 1 , "KEY" : 2 }`, `{"A\/B":"x"}`, `{"A/b":"x","text":"\"TEXT\""}`,
		`{"iteMſ":[]}`, "{\"\u212aEY\":2}",
		`{"text":"caf\u00e9 \u4e2d","TEXT":"b"}`, `{"t\u00e9xt":"x","note":"\ud83d\ude00"}`, `{"\u00e9":1,"\u004bEY":2}`,
	} {
		f.Add(seed)
	}
	t := reflect.TypeFor[foldArgs]()
	check := newKeyCheck(t)
	f.Fuzz(func(tt *testing.T, doc string) {
		if got, want := check.find(doc), check.caseOnlyKeys(doc); !reflect.DeepEqual(got, want) {
			tt.Fatalf("keyCheck.find(%s) = %v, want %v (caseOnlyKeys)", doc, got, want)
		}
		var generic map[string]json.RawMessage
		if json.Unmarshal([]byte(doc), &generic) != nil || generic == nil {
			return
		}
		hidden := hideKeys(doc, check.caseOnlyKeys(doc))
		if !json.Valid([]byte(hidden)) {
			tt.Fatalf("hideKeys(%s) = %s, not JSON", doc, hidden)
		}
		if left := check.caseOnlyKeys(hidden); len(left) > 0 {
			tt.Fatalf("caseOnlyKeys(%s) = %v after hiding", hidden, left)
		}
		var got foldArgs
		if json.Unmarshal([]byte(hidden), &got) != nil {
			return
		}
		var want foldArgs
		if raw, ok := generic["text"]; ok && json.Unmarshal(raw, &want.Text) != nil {
			return
		}
		if raw, ok := generic["key"]; ok && json.Unmarshal(raw, &want.Key) != nil {
			return
		}
		if got.Text != want.Text || got.Key != want.Key {
			tt.Errorf("decoding %s (hidden: %s) = text %q key %d, want %q %d", doc, hidden, got.Text, got.Key, want.Text, want.Key)
		}
	})
}

// TestFoldingEscape: only an escape that may write a name's character (ASCII, the Kelvin
// sign, the long s) or cannot be read sends the arguments to the walk; escaped accents and
// other scripts, as Python's json.dumps writes them, do not.
func TestFoldingEscape(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"text":"plain"}`:                  false,
		`{"text":"caf\u00e9 \u4e2d\u6587"}`: false,
		`{"emoji":"\ud83d\ude00"}`:          false,
		`{"\u0054EXT":"x"}`:                 true,
		`{"\u212aey":1}`:                    true,
		`{"\u017fize":1}`:                   true,
		`{"x":"\u00e9","\u004b":1}`:         true,
		`{"x":"\u12"}`:                      true, // cannot be read: the walk decides
		`{"x":"\\u0041"}`:                   true, // a backslash, then u0041: taken as an escape, which only costs the walk
	} {
		if got := foldingEscape(doc); got != want {
			t.Errorf("foldingEscape(%s) = %v, want %v", doc, got, want)
		}
	}
}
