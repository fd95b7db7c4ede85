package provider_test

import (
	"context"
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
