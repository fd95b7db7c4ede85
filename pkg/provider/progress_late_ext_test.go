package provider_test

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// orderToolsd is a ProviderService that welcomes the provider, reads its registration,
// sends n executes of tool and reads until the provider half-closes, noting the
// progress messages that came after their call's result. allAnswered is closed once
// every call has its result, done once the stream has ended.
type orderToolsd struct {
	toolsdv1.UnimplementedProviderServiceServer
	n           uint64
	tool        string
	allAnswered chan struct{}
	done        chan struct{}
	late        int // progress after its call's result; read once done is closed
}

func (s *orderToolsd) Connect(stream grpc.BidiStreamingServer[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]) error {
	defer close(s.done)
	if _, err := stream.Recv(); err != nil { // hello
		return err
	}
	welcome := &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{Welcome: &toolsdv1.ProviderWelcome{ProviderId: "p-1"}}}
	if err := stream.Send(welcome); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil { // register
		return err
	}
	for id := uint64(1); id <= s.n; id++ {
		if err := stream.Send(executeMsg(id, s.tool, `{}`)); err != nil {
			return err
		}
	}
	answered := make(map[uint64]bool)
	for { // until the provider half-closes
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		switch {
		case m.GetResult() != nil:
			answered[m.GetResult().GetRequestId()] = true
			if uint64(len(answered)) == s.n {
				close(s.allAnswered)
			}
		case m.GetProgress() != nil && answered[m.GetProgress().GetRequestId()]:
			s.late++
		}
	}
}

// TestProgressAfterTheResultIsDropped: a handler may leave a goroutine reporting
// progress after it returned. What it reports once the call's result is on its way is
// dropped by the SDK, as Call.Progress says, rather than sent after the result for
// toolsd to drop: a report that had checked the call before it ended went out after
// the result when the result's send came between its check and its own send.
func TestProgressAfterTheResultIsDropped(t *testing.T) {
	const calls = 20
	srv := &orderToolsd{n: calls, tool: "leaky", allAnswered: make(chan struct{}), done: make(chan struct{})}
	addr := startScripted(t, srv)
	stop := make(chan struct{})
	var reporters sync.WaitGroup
	p := newProvider(t)
	p.Add(provider.NewTool("leaky", "reports progress after it returns", func(_ context.Context, call provider.Call, _ struct{}) (string, error) {
		reporting := make(chan struct{})
		reporters.Go(func() {
			call.Progress("starting", 0, 0)
			close(reporting)
			for {
				select {
				case <-stop:
					return
				default:
					call.Progress("still going", 1, 2)
				}
			}
		})
		<-reporting
		return "done", nil
	}))
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, addr) }()
	wait(t, srv.allAnswered, "every call's result")
	close(stop)
	reporters.Wait()
	cancel() // the provider half-closes: toolsd has read every message sent before
	if err := <-ran; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	wait(t, srv.done, "toolsd's stream to end")
	if srv.late != 0 {
		t.Errorf("toolsd got %d progress messages after their call's result, want 0", srv.late)
	}
}
