package provider_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
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
