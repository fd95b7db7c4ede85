package app_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/pkg/provider"
)

// refusedProviderAddr names the toolsd the child process of
// TestSDKRefusalIsOnStderrWithoutALogger connects to.
const refusedProviderAddr = "TOOLSD_TEST_REFUSED_PROVIDER_ADDR"

// TestSDKRefusalIsOnStderrWithoutALogger: a provider built without WithLogger, as the
// README's first provider is, says on standard error that toolsd refused its tool (here
// an invalid schema, INVALID_ARGUMENT); it said nothing, and the tool was just never
// called. The provider runs in a child process (this test binary again), whose standard
// error is read whole.
func TestSDKRefusalIsOnStderrWithoutALogger(t *testing.T) {
	if addr := os.Getenv(refusedProviderAddr); addr != "" {
		runRefusedProvider(t, addr)
		return
	}
	e := start(t, "")
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable() = %v", err)
	}
	cmd := exec.CommandContext(t.Context(), self, "-test.run=^TestSDKRefusalIsOnStderrWithoutALogger$", "-test.count=1")
	cmd.Env = append(os.Environ(), refusedProviderAddr+"="+e.app.Addr())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("provider process: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	lines := slices.Collect(strings.Lines(stderr.String()))
	if len(lines) != 1 || !strings.Contains(lines[0], "toolsd rejected a tool") {
		t.Fatalf("provider's standard error = %q, want the refusal alone (a connect and shutdown say nothing there)", lines)
	}
	line := lines[0]
	for _, want := range []string{"WARN", `"provider": "calculator"`, `"tool": "bad_schema"`, `"code": "INVALID_ARGUMENT"`, "invalid schema"} {
		if !strings.Contains(line, want) {
			t.Errorf("refusal line %q lacks %s", line, want)
		}
	}
}

// runRefusedProvider runs, with no logger, a provider of a tool toolsd registers and one
// whose schema it refuses, until toolsd has answered their registration.
func runRefusedProvider(t *testing.T, addr string) {
	p := provider.New("calculator")
	p.Add(provider.NewTool("good", "is registered",
		func(context.Context, provider.Call, struct{}) (string, error) { return "", nil }))
	p.Add(provider.NewTool("bad_schema", "has a schema toolsd refuses",
		func(context.Context, provider.Call, struct{}) (string, error) { return "", nil },
		provider.WithSchema(`{"type":"object","properties":{"a":{"type":"nope"}}}`)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx, addr) }()
	select {
	case <-p.Ready():
	case err := <-errc:
		t.Fatalf("Run() = %v before the registration was answered", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}
