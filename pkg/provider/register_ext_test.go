package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/pkg/provider"
)

// Tools whose definitions together exceed what toolsd receives in one message are
// registered in several messages rather than ending the stream on every connect.
func TestLargeRegistrationIsSplit(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := newProvider(t)
	pad := strings.Repeat("x", 900<<10)
	const n = 6 // 5.4 MiB in all, over gRPC's default 4 MiB receive limit
	for i := range n {
		p.Add(provider.NewTool(fmt.Sprintf("big%d", i), "big", func(context.Context, provider.Call, struct{}) (string, error) {
			return "ok", nil
		}, provider.WithSchema(`{"type":"object","description":"`+pad+`"}`)))
	}
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	reg.WaitFor(t, "every tool registered", func() bool {
		for i := range n {
			if r, ok := reg.Lookup("", fmt.Sprintf("big%d", i)); !ok || r.Owner != p.ProviderID() {
				return false
			}
		}
		return true
	})
}
