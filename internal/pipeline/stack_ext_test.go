package pipeline_test

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// stackBudget is how deep a call may run from Run to its Dispatcher. The scheduler
// gives a call's goroutine a 16 KiB stack up front (stack.Reserve); above Run
// the scheduler takes about 2 KiB and below the Dispatcher the broker and the gRPC send
// about 5 more. A pipeline that outgrows the rest makes every call copy its stack
// mid-call, frame by frame: when every stage was a closure around the next (20 KiB),
// that copy cost more CPU than all of the stages' own work. The race detector's
// instrumentation makes frames larger; its builds get a larger budget.
const stackBudget = 9 << 10

const raceStackBudget = 10 << 10

// TestCallStackDepth measures the stack a call uses between Pipeline.Run and the
// Dispatcher, with the daemon's own observer and stage tracer installed and a policy
// that runs the pre-execute checks.
func TestCallStackDepth(t *testing.T) {
	m := observe.New(prometheus.NewRegistry())
	var top, depth uintptr
	disp := dispatchFunc(func(context.Context, pipeline.Tool, *tool.Exec) tool.Result {
		depth = top - stackAddr()
		return tool.Result{Content: "ok"}
	})
	p := pipeline.New(nopResolver{&nopTool{def: tool.Definition{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}}}, disp,
		pipeline.WithPolicy(benchRules(t, false)),
		pipeline.WithObserver(m.Pipeline()),
		pipeline.WithStageTracer(observe.NewCallObserver(m, observe.WithCallLog(zap.NewNop()))),
	)
	e := &tool.Exec{Call: tool.Call{CallID: "c1", SessionID: "s1", Scope: "global", Name: "echo", Arguments: `{}`}}
	// The stack must not move between the two addresses: it is grown first, and no GC
	// runs meanwhile (a GC may shrink a goroutine's stack, moving it).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	done := make(chan tool.Result)
	go func() {
		growStack(1)
		top = stackAddr()
		done <- p.Run(t.Context(), e)
	}()
	if r := <-done; r.IsError {
		t.Fatalf("call failed: %+v", r.Err)
	}
	t.Logf("Run → Dispatcher: %d bytes of stack", depth)
	budget := uintptr(stackBudget)
	if raceBuild {
		budget = raceStackBudget
	}
	if depth == 0 || depth > budget {
		t.Errorf("a call uses %d bytes of stack from Run to its Dispatcher, want at most %d: keep the prepare checks plain calls and failure paths out of line", depth, budget)
	}
}

type dispatchFunc func(context.Context, pipeline.Tool, *tool.Exec) tool.Result

func (f dispatchFunc) Dispatch(ctx context.Context, t pipeline.Tool, e *tool.Exec) tool.Result {
	return f(ctx, t, e)
}

// stackAddr returns the address of a variable in its own frame: near the stack pointer.
//
//go:noinline
func stackAddr() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b))
}

//go:noinline
func growStack(i int) byte {
	var pad [64 << 10]byte
	pad[i] = 1
	return pad[i+1]
}
