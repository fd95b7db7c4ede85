package broker_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestAPanicHandlingAProviderMessageEndsOnlyItsStream: a panic while a provider's
// message is handled (here, in the registry) ran on the stream's receive goroutine,
// which nothing recovered, and took the whole process down with every batch in it. It
// now ends that provider's stream with INTERNAL and is counted, as a panicking stage
// fails only its call; other providers go on.
func TestAPanicHandlingAProviderMessageEndsOnlyItsStream(t *testing.T) {
	reg := brokertest.NewRegistrar()
	reg.Reject = func(_ string, def tool.Definition) error {
		if def.Name == "boom" {
			panic("a registry bug")
		}
		return nil
	}
	obs := newRecorder()
	srv := brokertest.Start(t, reg, broker.WithObserver(obs))
	bad := helloRaw(t, srv, "bad", 0)
	bad.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{{Name: "boom", ParametersJson: `{"type":"object"}`}}},
	}})
	if err := bad.end(); status.Code(err) != codes.Internal {
		t.Fatalf("stream of the message that panicked ended with %v, want Internal", err)
	}
	obs.waitFor(t, "panicked", 1)

	good := helloRaw(t, srv, "good", 0)
	good.send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{{Name: "fine", ParametersJson: `{"type":"object"}`}}},
	}})
	if st := good.next().GetRegisterResult().GetTools(); len(st) != 1 || st[0].GetErrorCode() != "" {
		t.Fatalf("another provider's registration after the panic = %v, want it accepted", st)
	}
}
