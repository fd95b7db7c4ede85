package broker_test

import (
	"context"
	"errors"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
)

func TestScopeGuardRejectsForeignScopes(t *testing.T) {
	reg := brokertest.NewRegistrar()
	guard := func(_ context.Context, scope string) error {
		if scope != "tenant-a" {
			return errors.New("provider may not register into " + scope)
		}
		return nil
	}
	srv := brokertest.Start(t, reg, broker.WithScopeGuard(guard))
	stream := helloRaw(t, srv, "guarded", 0)
	def := &toolsdv1.ToolDefinition{Name: "t", ParametersJson: `{"type":"object"}`}
	for scope, wantCode := range map[string]string{"tenant-a": "", "tenant-b": "PERMISSION_DENIED", "": "PERMISSION_DENIED"} {
		stream.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
			Register: &toolsdv1.RegisterTools{Ref: 1, Scope: scope, Tools: []*toolsdv1.ToolDefinition{def}},
		}})
		m := stream.next()
		got := m.GetRegisterResult().GetTools()[0].GetErrorCode()
		if got != wantCode {
			t.Errorf("register into %q: error_code = %q, want %q", scope, got, wantCode)
		}
	}
}
