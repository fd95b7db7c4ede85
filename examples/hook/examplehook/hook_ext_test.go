package examplehook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/toolsd/toolsd/examples/hook/examplehook"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

type hookService struct {
	toolsdv1.UnimplementedHookServiceServer
	hub *hook.Hub
}

func (s hookService) Connect(stream toolsdv1.HookService_ConnectServer) error {
	return s.hub.Connect(stream)
}

type anyTool struct{ def tool.Definition }

func (t anyTool) Definition() *tool.Definition { return &t.def }
func (anyTool) Owner() string                  { return "p1" }
func (anyTool) Hash() string                   { return "" }
func (anyTool) ValidateArguments(raw string) error {
	if !json.Valid([]byte(raw)) {
		return errors.New("invalid JSON")
	}
	return nil
}
func (anyTool) ValidateOutput([]byte) error { return nil }

type resolver struct{}

func (resolver) Resolve(_ context.Context, c *tool.Call) (pipeline.Tool, error) {
	return anyTool{def: tool.Definition{Name: c.Name}}, nil
}

// echoer returns the text argument of every call.
type echoer struct{ calls chan string }

func (d echoer) Dispatch(_ context.Context, _ pipeline.Tool, e *tool.Exec) tool.Result {
	d.calls <- e.Name
	var args struct{ Text string }
	_ = json.Unmarshal([]byte(e.Arguments), &args)
	return tool.Result{Content: args.Text}
}

// start serves a hub over bufconn and runs the example hook against it until the test
// ends; it returns once the hook is subscribed, and the channel that receives Run's result.
func start(t *testing.T) (*hook.Hub, <-chan error) {
	t.Helper()
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	hub := hook.New(hook.WithLogger(log))
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	toolsdv1.RegisterHookServiceServer(srv, hookService{hub: hub})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- examplehook.Run(ctx, cc, log) }()
	t.Cleanup(func() {
		cancel()
		hub.Shutdown("test over")
		_ = cc.Close()
		srv.Stop()
		<-served
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(hub.Hooks()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the example hook did not connect")
		}
		time.Sleep(time.Millisecond)
	}
	return hub, ran
}

func TestExampleHook(t *testing.T) {
	hub, _ := start(t)
	d := echoer{calls: make(chan string, 10)}
	p := pipeline.New(resolver{}, d,
		pipeline.WithPreExecute(hub.PreExecute()),
		pipeline.WithPostExecute(hub.PostExecute()),
		pipeline.WithResultObservers(hub.ResultObserver()))
	denied := tool.FailureWithReason(tool.CodeDenied, "call denied by policy", `hook "example-hook": arguments contain "rm -rf"`)
	denied.Err.Tool = "shell"
	tests := map[string]struct {
		name, args string
		want       tool.Result
		dispatched bool
	}{
		"rm -rf is denied privately": {name: "shell", args: `{"text":"rm -rf /"}`, want: denied},
		// The tool reads the decoded arguments, so an escape in the JSON text hides nothing.
		"escaped rm -rf is denied":  {name: "shell", args: `{"text":"rm -r\u0066 /"}`, want: denied},
		"rm -rf in a key is denied": {name: "shell", args: `{"a":[{"rm\u0020-rf":1}]}`, want: denied},
		"echo shouts":               {name: "echo", args: `{"text":"shout: hello"}`, want: tool.Result{Content: "SHOUT: HELLO", AdditionalContexts: []string{"echo was called"}}, dispatched: true},
		"echo as is":                {name: "echo", args: `{"text":"hello"}`, want: tool.Result{Content: "hello", AdditionalContexts: []string{"echo was called"}}, dispatched: true},
		"other tools untouched":     {name: "add", args: `{"text":"shout: x"}`, want: tool.Result{Content: "shout: x"}, dispatched: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &tool.Exec{Call: tool.Call{SessionID: "s", CallID: "c", Name: tc.name, Arguments: tc.args}}
			got := p.Run(t.Context(), e)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Run(%s %s) (-want +got):\n%s", tc.name, tc.args, diff)
			}
			select {
			case <-d.calls:
				if !tc.dispatched {
					t.Error("denied call was dispatched")
				}
			default:
				if tc.dispatched {
					t.Error("call was not dispatched")
				}
			}
		})
	}
}

func TestExampleHookGoodbye(t *testing.T) {
	hub, ran := start(t)
	hub.Shutdown("restart")
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run() = %v after goodbye, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run() still running after goodbye")
	}
}

func TestDecideIgnoresNotifications(t *testing.T) {
	req := &toolsdv1.HookRequest{RequestId: 1, Stage: toolsdv1.HookStage_HOOK_STAGE_RESULT, Call: &toolsdv1.HookCall{Tool: "echo"}}
	if d := examplehook.Decide(req); d != nil {
		t.Errorf("Decide(RESULT) = %v, want nil", d)
	}
}

// TestExampleHookTakesLargeRequests: a post-execute request carries the call's arguments
// and its result, which together pass gRPC's default 4 MiB receive limit well within
// toolsd's limits. The hook takes it and answers; at Recv it would end the stream, and
// with it every call pending on the hook (they fail closed).
func TestExampleHookTakesLargeRequests(t *testing.T) {
	hub, ran := start(t)
	d := echoer{calls: make(chan string, 1)}
	p := pipeline.New(resolver{}, d, pipeline.WithPreExecute(hub.PreExecute()), pipeline.WithPostExecute(hub.PostExecute()),
		pipeline.WithConfig(pipeline.Config{MaxResultBytes: tool.MaxResultBytes}))
	text := strings.Repeat("a", 5<<19) // 2.5 MiB, in the arguments and in the result
	args, _ := json.Marshal(map[string]string{"text": text})
	got := p.Run(t.Context(), &tool.Exec{Call: tool.Call{SessionID: "s", CallID: "c", Name: "echo", Arguments: string(args)}})
	if got.IsError || got.Content != text || !cmp.Equal(got.AdditionalContexts, []string{examplehook.EchoContext}) {
		t.Errorf("Run() = error %v, %d bytes of content, contexts %q; want the echo with the hook's context", got.Err, len(got.Content), got.AdditionalContexts)
	}
	select {
	case err := <-ran:
		t.Errorf("Run() = %v, want the hook still running", err)
	default:
	}
}
