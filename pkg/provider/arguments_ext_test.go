package provider_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// toolsd sends arguments as large as its limits.max_argument_bytes, which an operator
// may set above gRPC's default 4 MiB receive limit: such a call reaches its handler
// rather than ending the stream (and failing every call on it) at the provider's Recv.
func TestLargeArgumentsKeepTheStream(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := newProvider(t)
	p.Add(provider.NewTool("size", "counts its text", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
		return strconv.Itoa(len(a.Text)), nil
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	const n = 5 << 20
	got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("size", `{"text":"`+strings.Repeat("x", n)+`"}`), 1)
	if want := strconv.Itoa(n); got.IsError || got.Content != want {
		t.Errorf("Call(size) with %d bytes of arguments = %+v, want content %s", n, got, want)
	}
}

// An integer written as 1.0 makes the SDK decode the arguments again with such numbers
// written as 1; the rest of the text stays as toolsd sent it: a json.RawMessage field
// (or a type that decodes itself, such as an ordered map) gets its keys in their order
// and its spacing, not the text re-encoded from a Go map.
func TestIntegerRewriteKeepsTheRestOfTheArguments(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := newProvider(t)
	type rawArgs struct {
		N   int             `json:"n"`
		Raw json.RawMessage `json:"raw"`
	}
	p.Add(provider.NewTool("raw", "returns its raw field", func(_ context.Context, _ provider.Call, a rawArgs) (string, error) {
		return strconv.Itoa(a.N) + " " + string(a.Raw), nil
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("raw", `{"n":2.0,"raw":{"b": 1.5,"a":[2.0, "x"]}}`), 1)
	if want := `2 {"b": 1.5,"a":[2, "x"]}`; got.IsError || got.Content != want {
		t.Errorf("Call(raw) = %+v, want content %s", got, want)
	}
}

// JSON Schema names properties case-sensitively and encoding/json matches fields
// case-insensitively: a key toolsd's validation passes as a property the schema does not
// name ("LIMIT", an additional property like any other) must not reach the field of one
// it does name ("limit"), past the schema's maximum and past the hooks and policy that
// read the arguments ("text" was "harmless" for them).
func TestArgumentNamesAreCaseSensitive(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	type item struct {
		Path string `json:"path"`
	}
	type limitArgs struct {
		Text  string          `json:"text"`
		Limit int             `json:"limit,omitempty" jsonschema:"maximum=50"`
		Items []item          `json:"items,omitempty"`
		ByKey map[string]item `json:"by_key,omitempty"`
		Raw   json.RawMessage `json:"raw,omitempty"`
	}
	handler := func(_ context.Context, _ provider.Call, a limitArgs) (string, error) {
		paths := make([]string, 0, len(a.Items)+len(a.ByKey))
		for _, it := range a.Items {
			paths = append(paths, it.Path)
		}
		for k, it := range a.ByKey {
			paths = append(paths, k+"="+it.Path)
		}
		return a.Text + " " + strconv.Itoa(a.Limit) + " " + strings.Join(paths, ",") + " " + string(a.Raw), nil
	}
	lenient := provider.NewTool("limited", "lenient", handler)
	strict := provider.NewTool("strict_limited", "strict, with a schema that allows other properties", handler,
		provider.WithSchema(lenient.Schema()), provider.StrictArguments())
	p := newProvider(t)
	p.Add(lenient, strict)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	for name, tc := range map[string]struct {
		tool, args string
		want       tool.Result
	}{
		"property in other case":          {"limited", `{"text":"harmless","TEXT":"rm -rf /"}`, tool.Result{Content: "harmless 0  "}},
		"past the maximum":                {"limited", `{"text":"a","LIMIT":1000}`, tool.Result{Content: "a 0  "}},
		"other case first":                {"limited", `{"Text" : "evil", "text":"a"}`, tool.Result{Content: "a 0  "}},
		"in a map's values":               {"limited", `{"text":"a","items":[{"path":"/tmp"}],"by_key":{"k":{"path":"/x","PATH":"/etc"}}}`, tool.Result{Content: "a 0 /tmp,k=/x "}},
		"folded by Unicode (Kelvin sign)": {"limited", `{"text":"a","by_\u212aey":{"k":{"path":"/etc"}}}`, tool.Result{Content: "a 0  "}},
		"in an array's objects":           {"limited", `{"text":"a","items":[{"path":"/tmp","Path":"/etc"},{"path":"/a","pAtH":"/etc"}]}`, tool.Result{Content: "a 0 /tmp,/a "}},
		"escaped key":                     {"limited", `{"text":"a","\u004cimit":7}`, tool.Result{Content: "a 0  "}},
		"raw value kept as sent":          {"limited", `{"text":"a","raw":{"Text":1, "limit":2.0}}`, tool.Result{Content: `a 0  {"Text":1, "limit":2.0}`}},
		"exact names still decode":        {"limited", `{"text":"a","limit":5.0,"items":[{"path":"/p"}]}`, tool.Result{Content: "a 5 /p "}},
		"strict refuses it":               {"strict_limited", `{"text":"a","LIMIT":1000}`, tool.Failure(tool.CodeInvalidArguments, `invalid arguments: json: unknown field "LIMIT"`)},
	} {
		t.Run(name, func(t *testing.T) {
			if !schemaAccepts(t, lenient.Schema(), tc.args) {
				t.Fatalf("schema %s refuses %s: toolsd would not send it", lenient.Schema(), tc.args)
			}
			got := srv.Broker.Call(t.Context(), p.ProviderID(), exec(tc.tool, tc.args), 1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Call(%s, %s) mismatch (-want +got):\n%s", tc.tool, tc.args, diff)
			}
		})
	}
}
