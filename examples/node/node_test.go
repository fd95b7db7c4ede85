package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	goprovider "github.com/toolsd/toolsd/pkg/provider"
)

// toolsdConfig is a loopback, in-memory toolsd. Its cancel_grace is far longer than the
// test waits for a cancelled call, so an ABORTED result that comes back promptly shows
// that provider.mjs answered the cancel, not that toolsd gave up waiting for it. It
// takes arguments over gRPC's default 4 MiB message limit, as an operator may allow.
const toolsdConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
session: {store: memory}
limits: {cancel_grace: 1m, max_request_bytes: 15MiB, max_argument_bytes: 8MiB}
`

// TestNodeExamples runs provider.mjs against toolsd, calls its tools, cancels one of its
// calls, runs agent.mjs, and restarts toolsd to see the provider reconnect.
func TestNodeExamples(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	stopToolsd := runToolsd(t, lis)
	provider := startNode(t, node, "provider.mjs", "--addr", addr)
	provider.waitFor(t, 1, "provider: registered shout", "provider: registered wait")
	client := toolsdv1.NewToolServiceClient(dial(t, addr))

	t.Run("shout", func(t *testing.T) {
		results, _ := executeBatch(t, client, batch("node-shout", call("c1", "shout", `{"text": "hello, toolsd"}`)), nil)
		if len(results) != 1 || results[0].GetIsError() || results[0].GetContent() != "HELLO, TOOLSD" {
			t.Errorf("ExecuteBatch(shout) results = %v, want one with content %q", results, "HELLO, TOOLSD")
		}
	})

	t.Run("wait beyond a timer's range", func(t *testing.T) {
		// Node's timers hold at most 2^31-1 ms and fire a longer one after 1 ms: the
		// schema refuses such a wait rather than the tool claiming it waited.
		results, _ := executeBatch(t, client, batch("node-wait-long", call("c1", "wait", `{"ms": 2147483648}`)), nil)
		if len(results) != 1 || results[0].GetError().GetCode() != "INVALID_ARGUMENTS" {
			t.Errorf("ExecuteBatch(wait 2^31 ms) results = %v, want one INVALID_ARGUMENTS", results)
		}
	})

	t.Run("large arguments, oversized result", func(t *testing.T) {
		// 5 MiB of arguments reach the provider in one message (over grpc-js's default
		// receive limit), and the 5 MiB answer, over max_result_bytes (1 MiB), goes back
		// as its size only: the call fails alone and the stream stays up.
		text := strings.Repeat("x", 5<<20)
		results, _ := executeBatch(t, client, batch("node-large", call("c1", "shout", `{"text": "`+text+`"}`)), nil)
		if len(results) != 1 || results[0].GetError().GetCode() != "RESULT_TOO_LARGE" {
			t.Errorf("ExecuteBatch(shout 5 MiB) results = %.300v, want one RESULT_TOO_LARGE", results)
		}
		results, _ = executeBatch(t, client, batch("node-large-after", call("c1", "shout", `{"text": "still here"}`)), nil)
		if len(results) != 1 || results[0].GetContent() != "STILL HERE" {
			t.Errorf("ExecuteBatch(shout) after the large call = %v, want content %q", results, "STILL HERE")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// The wait call reports progress once it runs at the provider: cancel the batch then.
		var cancelled time.Time
		onProgress := func(stream toolsdv1.ToolService_ExecuteBatchClient) {
			if !cancelled.IsZero() {
				return
			}
			cancelled = time.Now()
			if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "test"}}}); err != nil {
				t.Errorf("sending cancel: %v", err)
			}
		}
		results, settled := executeBatch(t, client, batch("node-cancel", call("c1", "wait", `{"ms": 50000}`)), onProgress)
		if cancelled.IsZero() {
			t.Fatal("the wait call reported no progress, so it was never cancelled")
		}
		if elapsed := time.Since(cancelled); elapsed > 30*time.Second {
			t.Errorf("the cancelled call took %v to settle, want the provider to answer its cancel long before cancel_grace (1m) ends", elapsed)
		}
		if len(results) != 1 || results[0].GetError().GetCode() != "ABORTED" || !settled.GetCancelled() {
			t.Errorf("ExecuteBatch(wait) cancelled = results %v, settled %v; want one ABORTED result and a cancelled settle", results, settled)
		}
	})

	t.Run("agent", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, node, "agent.mjs", "--addr", addr).CombinedOutput()
		if err != nil {
			t.Fatalf("node agent.mjs = %v, output:\n%s", err, out)
		}
		// Progress lines may come anywhere before their result; these come in this order.
		want := []string{
			"prompt tools (fingerprint ",
			"  shout ",
			"  wait ",
			"accepted: batch ",
			"result 0 call_1: waited 200 ms",
			"result 1 call_2: HELLO FROM NODE",
			"settled: 2 results, cancelled=false, concludes_turn=false",
		}
		if missing := missingInOrder(string(out), want); missing != "" {
			t.Errorf("node agent.mjs printed no line starting %q after the lines before it; output:\n%s", missing, out)
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		stopToolsd()
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("re-listening on %s: %v", addr, err)
		}
		runToolsd(t, lis)
		provider.waitFor(t, 2, "provider: registered shout", "provider: registered wait")
		client := toolsdv1.NewToolServiceClient(dial(t, addr))
		results, _ := executeBatch(t, client, batch("node-reconnect", call("c1", "shout", `{"text": "again"}`)), nil)
		if len(results) != 1 || results[0].GetContent() != "AGAIN" {
			t.Errorf("ExecuteBatch(shout) on the restarted toolsd = %v, want content %q", results, "AGAIN")
		}
	})
}

// TestNodeAgentReceivesLargeResults: agent.mjs takes a result as large as toolsd allows
// (max_result_bytes, at most 8 MiB), over grpc-js's default 4 MiB receive limit. Here a
// Go provider serves the agent's tools, its shout answering with 6 MiB.
func TestNodeAgentReceivesLargeResults(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	addr := listenToolsd(t, strings.Replace(toolsdConfig, "limits: {", "limits: {max_result_bytes: 8MiB, ", 1))
	large := strings.Repeat("x", 6<<20)
	p := goprovider.New("large", goprovider.WithLogger(zaptest.NewLogger(t)))
	type waitArgs struct {
		Ms int `json:"ms"`
	}
	type shoutArgs struct {
		Text string `json:"text"`
	}
	p.Add(
		goprovider.NewTool("wait", "answers at once", func(context.Context, goprovider.Call, waitArgs) (string, error) {
			return "waited", nil
		}),
		goprovider.NewTool("shout", "answers with 6 MiB", func(context.Context, goprovider.Call, shoutArgs) (string, error) {
			return large, nil
		}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, addr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("provider Run() = %v, want nil", err)
		}
	})
	select {
	case <-p.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the Go provider did not register within 20s")
	}

	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	out, err := exec.CommandContext(actx, node, "agent.mjs", "--addr", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("node agent.mjs = %v, output:\n%.2000s", err, out)
	}
	if !strings.Contains(string(out), "\nresult 1 call_2: "+large+"\n") {
		t.Errorf("node agent.mjs printed no line with shout's 6 MiB result; output:\n%.2000s", out)
	}
}

// TestNodeAgentAnswersApprovals: agent.mjs answers an approval request, approving or
// (with --deny) denying the call, and its answer echoes the request's request_id, as
// toolsd's "approval answered" log line shows.
func TestNodeAgentAnswersApprovals(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	core, logs := observer.New(zapcore.InfoLevel)
	log := zaptest.NewLogger(t).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	runToolsdWith(t, lis, toolsdConfig+`policy: {rules: [{scope: "**", tool: shout, decision: ask, reason: "shout is loud"}]}`+"\n",
		app.WithLogger(log))
	provider := startNode(t, node, "provider.mjs", "--addr", addr)
	provider.waitFor(t, 1, "provider: registered shout", "provider: registered wait")

	for name, tc := range map[string]struct {
		args   []string
		result string
	}{
		"approve": {result: "result 1 call_2: HELLO FROM NODE"},
		"deny":    {args: []string{"--deny"}, result: "result 1 call_2: Error: call was not approved: decided by examples/node/agent.mjs [APPROVAL_DENIED]"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			session := "node-approval-" + name
			out, err := exec.CommandContext(ctx, node, append([]string{"agent.mjs", "--addr", addr, "--session", session}, tc.args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("node agent.mjs %v = %v, output:\n%s", tc.args, err, out)
			}
			want := []string{
				"approval requested for shout {\"text\": \"hello from node\"} (shout is loud): approving=" + strconv.FormatBool(tc.args == nil),
				tc.result,
				"settled: 2 results, cancelled=false",
			}
			if missing := missingInOrder(string(out), want); missing != "" {
				t.Errorf("node agent.mjs %v printed no line starting %q after the lines before it; output:\n%s", tc.args, missing, out)
			}
			// The batch stream's first approval request has request_id 1.
			var answers []map[string]any
			echoed := false
			for _, e := range logs.FilterMessage("approval answered").FilterField(zap.String("call_id", "call_2")).All() {
				answers = append(answers, e.ContextMap())
				if e.ContextMap()["request_id"] == uint64(1) && e.ContextMap()["approved"] == (tc.args == nil) {
					echoed = true
				}
			}
			if !echoed {
				t.Errorf("toolsd logged approval answers %v, want one with request_id 1 and approved %t", answers, tc.args == nil)
			}
		})
	}
}

// TestNodeProviderRetakesATakenName: a registration refused with ALREADY_EXISTS (the
// name held by another stream, as toolsd's view of a provider's previous stream often
// is after a quick reconnect) is sent again until the name is free.
func TestNodeProviderRetakesATakenName(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	addr := listenToolsd(t, toolsdConfig)
	stopHolder := holdShout(t, addr)

	provider := startNode(t, node, "provider.mjs", "--addr", addr)
	provider.waitFor(t, 1, "provider: registered wait") // shout was refused in the same answer
	stopHolder()
	provider.waitFor(t, 1, "provider: registered shout")
	client := toolsdv1.NewToolServiceClient(dial(t, addr))
	results, _ := executeBatch(t, client, batch("node-retake", call("c1", "shout", `{"text": "mine now"}`)), nil)
	if len(results) != 1 || results[0].GetContent() != "MINE NOW" {
		t.Errorf("ExecuteBatch(shout) once the name was freed = %v, want content %q", results, "MINE NOW")
	}
}

// TestNodeProviderGivesUpATakenName: a name that stays taken is registered again only
// for the retake window (two minutes by default, as in the Go SDK; one second here),
// then given up: another provider may really own it.
func TestNodeProviderGivesUpATakenName(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	addr := listenToolsd(t, toolsdConfig)
	holdShout(t, addr)

	provider := startNode(t, node, "provider.mjs", "--addr", addr, "--retake-window-ms", "1000")
	provider.waitFor(t, 1, "provider: registered wait")
	lines := provider.waitForPrefix(t, 1, "provider: shout is still taken after ")
	if !strings.HasSuffix(lines[0], "giving up registering it on this stream") {
		t.Errorf("provider logged %q, want it to give up on shout", lines[0])
	}
}

// TestNodeProviderNamesFewToolsPerMessage: as the Go SDK does, the provider names at
// most 100 tools in a register message. toolsd refuses the tools past its
// limits.max_tools_per_provider one by one, but ends the stream of a message naming over
// twice as many: 242 tools in one message would end it, and again after every reconnect,
// so that none of them stayed registered.
func TestNodeProviderNamesFewToolsPerMessage(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	addr := listenToolsd(t, strings.Replace(toolsdConfig, "limits: {", "limits: {max_tools_per_provider: 100, ", 1))
	provider := startNode(t, node, "testdata/many_tools.mjs", "--addr", addr)
	provider.waitFor(t, 1, "provider: registered shout", "provider: registered tool_98")
	provider.waitForPrefix(t, 1, "provider: tool_240 refused: RESOURCE_EXHAUSTED")
	client := toolsdv1.NewToolServiceClient(dial(t, addr))
	results, _ := executeBatch(t, client, batch("node-many", call("c1", "shout", `{"text": "still here"}`)), nil)
	if len(results) != 1 || results[0].GetContent() != "STILL HERE" {
		t.Errorf("ExecuteBatch(shout) = %v, want content %q", results, "STILL HERE")
	}
	if out := provider.String(); strings.Contains(out, "provider: stream ended") {
		t.Errorf("the provider's stream ended; output:\n%s", out)
	}
}

// holdShout runs a Go provider that registers shout at toolsd (addr) until the returned
// function (or the test's end) stops it.
func holdShout(t *testing.T, addr string) (stop func()) {
	t.Helper()
	holder := goprovider.New("holder", goprovider.WithLogger(zaptest.NewLogger(t)))
	holder.Add(goprovider.NewTool("shout", "holds the name", func(context.Context, goprovider.Call, struct{}) (string, error) {
		return "held", nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	holderDone := make(chan error, 1)
	go func() { holderDone <- holder.Run(ctx, addr) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-holderDone; err != nil {
				t.Errorf("holder Run() = %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-holder.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the Go provider holding shout did not register within 20s")
	}
	return stop
}

// requireNode returns the paths of node and npm, or skips the test.
func requireNode(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node and npm are not both on PATH: skipping the Node.js example test (install Node.js 20+ to run it)")
	}
	return node, npm
}

// installDeps runs `npm ci` in the example's directory unless node_modules already
// holds what package-lock.json pins (`make test` installs it first, by the same rule).
func installDeps(t *testing.T, npm string) {
	t.Helper()
	lock, err := os.Stat("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	if installed, err := os.Stat(filepath.Join("node_modules", ".package-lock.json")); err == nil && installed.ModTime().After(lock.ModTime()) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund").CombinedOutput(); err != nil {
		t.Fatalf("npm ci = %v, output:\n%s", err, out)
	}
}

// runToolsd runs toolsd from toolsdConfig on lis until stop (or the test's end).
func runToolsd(tb testing.TB, lis net.Listener) (stop func()) {
	tb.Helper()
	return runToolsdWith(tb, lis, toolsdConfig)
}

// listenToolsd runs toolsd from the YAML config yml on a loopback port until the test's
// end, and returns its address.
func listenToolsd(tb testing.TB, yml string) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	runToolsdWith(tb, lis, yml)
	return lis.Addr().String()
}

// runToolsdWith runs toolsd from the YAML config yml, with opts after the test's
// logger and lis, until stop (or the test's end).
func runToolsdWith(tb testing.TB, lis net.Listener, yml string, opts ...app.Option) (stop func()) {
	tb.Helper()
	cfg, err := config.Parse([]byte(yml), "node_test.yaml")
	if err != nil {
		tb.Fatalf("config.Parse() = %v", err)
	}
	a, err := app.New(cfg, append([]app.Option{app.WithLogger(zaptest.NewLogger(tb)), app.WithListener(lis)}, opts...)...)
	if err != nil {
		tb.Fatalf("app.New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("App.Run() = %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

func dial(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("grpc.NewClient(%s) = %v", addr, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// nodeProcess is a node process the test runs, and its output: standard output and
// standard error together, and standard error alone in stderr.
type nodeProcess struct {
	*lineLog
	stderr *lineLog
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
}

// waitExit waits up to 20 s for the process to exit by itself.
func (p *nodeProcess) waitExit(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		tb.Fatalf("node did not exit within 20s; output:\n%s", p.lineLog)
	}
}

// interrupt sends the process SIGINT, as Ctrl-C would.
func (p *nodeProcess) interrupt(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		tb.Fatalf("interrupting node: %v", err)
	}
}

// startNode runs `node script args...` in the example's directory until the test ends,
// then interrupts it as Ctrl-C would and expects it to exit 0 (it is killed if it has
// not within 10 s).
func startNode(t *testing.T, node, script string, args ...string) *nodeProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	out, errOut := newLineLog(), newLineLog()
	cmd.Stdout, cmd.Stderr = out, io.MultiWriter(out, errOut)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting node %s: %v", script, err)
	}
	exited := make(chan struct{})
	var err error
	go func() {
		defer close(exited)
		err = cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		// Wait reports the cancel even after a clean exit: the exit status decides.
		if !cmd.ProcessState.Success() {
			t.Errorf("node %s after an interrupt = %v, want exit status 0", script, err)
		}
		if t.Failed() {
			t.Logf("node %s output:\n%s", script, out)
		}
	})
	return &nodeProcess{lineLog: out, stderr: errOut, cmd: cmd, exited: exited}
}

// lineLog collects a process's output and lets a test wait for lines in it.
type lineLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits up to 20 s until each of lines has been printed n times or more.
func (l *lineLog) waitFor(tb testing.TB, n int, lines ...string) {
	tb.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		text, changed := l.buf.String(), l.changed
		l.mu.Unlock()
		done := true
		for _, line := range lines {
			done = done && strings.Count(text, line+"\n") >= n
		}
		if done {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			tb.Fatalf("no %d× %q within 20s; output:\n%s", n, lines, text)
		}
	}
}

// waitForPrefix waits up to 20 s until n lines starting with prefix have been printed,
// and returns the first n.
func (l *lineLog) waitForPrefix(tb testing.TB, n int, prefix string) []string {
	tb.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		text, changed := l.buf.String(), l.changed
		l.mu.Unlock()
		var found []string
		for line := range strings.Lines(text) {
			if line, ok := strings.CutSuffix(line, "\n"); ok && strings.HasPrefix(line, prefix) {
				found = append(found, line)
			}
		}
		if len(found) >= n {
			return found[:n]
		}
		select {
		case <-changed:
		case <-timeout.C:
			tb.Fatalf("no %d lines starting %q within 20s; output:\n%s", n, prefix, text)
		}
	}
}

// missingInOrder returns the first of prefixes that no line of out starts with after the
// line the previous prefix matched, or "" when every prefix matched in order.
func missingInOrder(out string, prefixes []string) string {
	lines := strings.Split(out, "\n")
	for _, p := range prefixes {
		for len(lines) > 0 && !strings.HasPrefix(lines[0], p) {
			lines = lines[1:]
		}
		if len(lines) == 0 {
			return p
		}
		lines = lines[1:]
	}
	return ""
}

func batch(session string, calls ...*toolsdv1.ToolCall) *toolsdv1.Batch {
	return &toolsdv1.Batch{SessionId: session, Calls: calls}
}

func call(id, name, args string) *toolsdv1.ToolCall {
	return &toolsdv1.ToolCall{CallId: id, Name: name, ArgumentsJson: args}
}

// executeBatch runs b to its settle. With onProgress nil it half-closes at once; else
// onProgress sees every progress message and may send on the stream (a cancel).
func executeBatch(t *testing.T, client toolsdv1.ToolServiceClient, b *toolsdv1.Batch, onProgress func(toolsdv1.ToolService_ExecuteBatchClient)) ([]*toolsdv1.ToolResult, *toolsdv1.BatchSettled) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := client.ExecuteBatch(ctx)
	if err != nil {
		t.Fatalf("ExecuteBatch() = %v", err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: b}}); err != nil {
		t.Fatalf("sending the batch: %v", err)
	}
	if onProgress == nil {
		if err := stream.CloseSend(); err != nil {
			t.Fatalf("CloseSend() = %v", err)
		}
	}
	var results []*toolsdv1.ToolResult
	var settled *toolsdv1.BatchSettled
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ExecuteBatch() stream = %v, after results %v", err, results)
		}
		switch {
		case m.GetProgress() != nil && onProgress != nil:
			onProgress(stream)
		case m.GetResult() != nil:
			results = append(results, m.GetResult())
		case m.GetSettled() != nil:
			settled = m.GetSettled()
		}
	}
	if settled == nil {
		t.Fatal("ExecuteBatch() ended without settled")
	}
	return results, settled
}
