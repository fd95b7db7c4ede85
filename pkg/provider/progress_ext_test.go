package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// A progress message larger than toolsd receives at all would end the stream, failing
// every call on it; the SDK keeps it within the welcome's max_result_bytes.
func TestOversizedProgressKeepsTheStream(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	p := newProvider(t)
	p.Add(provider.NewTool("chatty", "reports a lot", func(_ context.Context, call provider.Call, _ struct{}) (string, error) {
		call.Progress(strings.Repeat("é", 3<<20), 1, 2) // 6 MiB
		return "done", nil
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	var got tool.Progress
	e := exec("chatty", `{}`)
	e.Progress = func(pr tool.Progress) { got = pr }
	res := srv.Broker.Call(t.Context(), p.ProviderID(), e, 1)
	if res.Content != "done" {
		t.Fatalf("Call(chatty) = %+v, want content done", res)
	}
	if len(got.Message) == 0 || len(got.Message) > 4<<20 || !strings.HasPrefix(got.Message, "éé") {
		t.Errorf("progress message of %d bytes, want a truncated prefix", len(got.Message))
	}
}
