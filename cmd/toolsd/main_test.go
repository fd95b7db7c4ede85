package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// mainEnv makes the test binary run toolsd's main instead of the tests: the daemon the
// tests start is this very binary (race detector included), so nothing is built.
const mainEnv = "TOOLSD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// daemon is one toolsd process started by a test.
type daemon struct {
	cmd    *exec.Cmd
	addr   string // gRPC address, from the "toolsd serving" log line
	admin  string
	exited chan struct{} // closed once the process was reaped
	err    error         // cmd.Wait's result, valid after exited

	mu   sync.Mutex
	logs []map[string]any // every JSON log line
	raw  []string
}

// startDaemon runs toolsd on ephemeral loopback ports with args appended, and waits
// until it serves. The process is killed at cleanup if it is still running.
func startDaemon(tb testing.TB, args ...string) *daemon {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-level", "debug"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	// Under -race the child would sleep 1s at exit (atexit_sleep_ms) before exiting.
	cmd.Env = append(os.Environ(), mainEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting toolsd: %v", err)
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	serving := make(chan [2]string, 1)
	go func() {
		d.scan(stderr, serving)
		d.err = cmd.Wait()
		close(d.exited)
	}()
	tb.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-d.exited
		}
		if tb.Failed() {
			d.mu.Lock()
			tb.Logf("toolsd log:\n%s", strings.Join(d.raw, "\n"))
			d.mu.Unlock()
		}
	})
	select {
	case a := <-serving:
		d.addr, d.admin = a[0], a[1]
	case <-d.exited:
		tb.Fatalf("toolsd exited before serving: %v\n%s", d.err, strings.Join(d.raw, "\n"))
	case <-time.After(20 * time.Second):
		tb.Fatal("toolsd did not start serving within 20s")
	}
	return d
}

// scan records every log line until the process closes stderr.
func (d *daemon) scan(r io.Reader, serving chan<- [2]string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		d.mu.Lock()
		d.raw = append(d.raw, line)
		if m != nil {
			d.logs = append(d.logs, m)
		}
		d.mu.Unlock()
		if m["msg"] == "toolsd serving" {
			grpcAddr, _ := m["grpc"].(string)
			admin, _ := m["admin"].(string)
			serving <- [2]string{grpcAddr, admin}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// logged returns the log lines whose msg is msg.
func (d *daemon) logged(msg string) []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]any
	for _, m := range d.logs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// kill sends SIGKILL and waits until the process is gone.
func (d *daemon) kill(tb testing.TB) {
	tb.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("kill -9 toolsd: %v", err)
	}
	d.wait(tb)
}

// wait waits (at most 20s) for the process to exit.
func (d *daemon) wait(tb testing.TB) {
	tb.Helper()
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		tb.Fatal("toolsd did not exit within 20s")
	}
}

func dial(tb testing.TB, addr string) toolsdv1.ToolServiceClient {
	tb.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return toolsdv1.NewToolServiceClient(conn)
}

// runProvider connects an SDK provider with tools to addr and waits until they are
// registered. stop ends it and waits for every handler.
func runProvider(tb testing.TB, addr string, tools ...provider.Tool) (stop func()) {
	tb.Helper()
	p := provider.New("crash-test", provider.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	p.Add(tools...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, addr)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	tb.Cleanup(stop)
	select {
	case <-p.Ready():
	case <-time.After(10 * time.Second):
		tb.Fatal("provider did not register within 10s")
	}
	return stop
}

// readSession returns the events req reads and the epoch each came with.
func readSession(tb testing.TB, c toolsdv1.ToolServiceClient, req *toolsdv1.ReadSessionRequest) ([]*toolsdv1.SessionEvent, []uint64) {
	tb.Helper()
	stream, err := c.ReadSession(context.Background(), req)
	if err != nil {
		tb.Fatalf("ReadSession(%v) = %v", req, err)
	}
	var (
		events []*toolsdv1.SessionEvent
		epochs []uint64
	)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events, epochs
		}
		if err != nil {
			tb.Fatalf("ReadSession(%v).Recv() = %v", req, err)
		}
		events = append(events, m.GetEvent())
		epochs = append(epochs, m.GetEpoch())
	}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
