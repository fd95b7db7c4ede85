package exampletools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// serve runs the example tools behind a broker and returns the broker's server and the
// provider id.
func serve(t *testing.T, notes string) (*brokertest.Server, string) {
	t.Helper()
	return serveTools(t, exampletools.Tools(notes)...)
}

// serveTools runs tools behind a broker and returns the broker's server and the provider
// id.
func serveTools(t *testing.T, tools ...provider.Tool) (*brokertest.Server, string) {
	t.Helper()
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := provider.New("example", provider.WithLogger(zaptest.NewLogger(t)))
	p.Add(tools...)
	conn := srv.Dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	timer := time.NewTimer(brokertest.WaitTimeout)
	defer timer.Stop()
	select {
	case <-p.Ready():
	case <-timer.C:
		t.Fatal("example provider never became ready")
	}
	return srv, p.ProviderID()
}

func call(ctx context.Context, srv *brokertest.Server, id, name, args string) tool.Result {
	return srv.Broker.Call(ctx, id, &tool.Exec{Call: tool.Call{CallID: "c", Name: name, Arguments: args}}, 1)
}

func TestTools(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.txt")
	srv, id := serve(t, notes)
	for name, tc := range map[string]struct {
		tool, args string
		want       tool.Result
	}{
		"echo":      {"echo", `{"text":"héllo"}`, tool.Result{Content: "héllo"}},
		"add":       {"add", `{"a":1.5,"b":2}`, tool.Result{Content: "3.5", Value: json.RawMessage("3.5")}},
		"add ints":  {"add", `{"a":1,"b":2}`, tool.Result{Content: "3", Value: json.RawMessage("3")}},
		"sleep":     {"sleep", `{"ms":1}`, tool.Result{Content: "slept 1 ms"}},
		"sleep neg": {"sleep", `{"ms":-1}`, tool.Failure(tool.CodeToolError, "ms must not be negative")},
		"fail":      {"fail", `{"message":"as asked"}`, tool.Failure(tool.CodeToolError, "as asked")},
		"schema":    {"get_db_schema", `{}`, tool.Result{Content: exampletools.DBSchema}},
		"query": {"query_db", `{"sql":"SELECT * FROM users"}`, tool.Result{
			Content: `{"query":"SELECT * FROM users","columns":["id","name","email"],"rows":[[1,"Ada Lovelace","ada@example.com"],[2,"Alan Turing","alan@example.com"]]}`,
			Value:   json.RawMessage(`{"query":"SELECT * FROM users","columns":["id","name","email"],"rows":[[1,"Ada Lovelace","ada@example.com"],[2,"Alan Turing","alan@example.com"]]}`),
		}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, call(t.Context(), srv, id, tc.tool, tc.args)); diff != "" {
				t.Errorf("Call(%s, %s) mismatch (-want +got):\n%s", tc.tool, tc.args, diff)
			}
		})
	}
}

// A sleep longer than a time.Duration holds (about 292 years) sleeps until the call is
// cancelled; the milliseconds overflowed into a negative duration, and the tool
// answered at once that it had slept that long.
func TestSleepBeyondDurationWaitsForCancellation(t *testing.T) {
	// ms beyond what a Duration holds sleeps until cancelled: a tool that answered
	// before it is told to stop (a wrapped-around, negative timer fires at once) would
	// be wrong. The call is cancelled only once the provider is running it.
	res, cancel, _, _ := sleepInFlight(t, `{"ms":9223372036854775807}`)
	cancel()
	if got := <-res; got.Code() != tool.CodeAborted {
		t.Errorf("Call(sleep 2^63-1 ms) cancelled = %+v, want ABORTED", got)
	}
}

// sleepInFlight serves the sleep tool's handler, starts a call of it with args and
// returns once the handler runs, with the channel of the call's result, the function
// that cancels it, and the server and provider id for further calls. A call that ends
// before its handler runs fails the test. (The broker counts a call in flight before
// its execute is sent; a call cancelled in that window never reaches the provider and
// ends ABORTED_BEFORE_DISPATCH, so the handler itself tells when it runs.)
func sleepInFlight(t *testing.T, args string) (<-chan tool.Result, context.CancelFunc, *brokertest.Server, string) {
	t.Helper()
	started := make(chan struct{}, 1)
	tools := []provider.Tool{provider.NewTool("sleep", "Sleeps.", func(ctx context.Context, c provider.Call, a exampletools.SleepArgs) (string, error) {
		started <- struct{}{}
		return exampletools.Sleep(ctx, c, a)
	})}
	for _, tl := range exampletools.Tools("") {
		if tl.Name() != "sleep" {
			tools = append(tools, tl)
		}
	}
	srv, id := serveTools(t, tools...)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	res := make(chan tool.Result, 1)
	go func() { res <- call(ctx, srv, id, "sleep", args) }()
	timer := time.NewTimer(brokertest.WaitTimeout)
	defer timer.Stop()
	select {
	case <-started:
	case got := <-res:
		t.Fatalf("Call(sleep %s) = %+v before it was cancelled", args, got)
	case <-timer.C:
		t.Fatal("timed out waiting for the sleep handler to run")
	}
	return res, cancel, srv, id
}

func TestWriteNoteAppends(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.txt")
	srv, id := serve(t, notes)
	for _, text := range []string{"first", "second"} {
		if got := call(t.Context(), srv, id, "write_note", `{"text":"`+text+`"}`); got.Content != "note written" {
			t.Fatalf("Call(write_note) = %+v, want note written", got)
		}
	}
	got, err := os.ReadFile(notes)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "first\nsecond\n" {
		t.Errorf("notes file = %q, want %q", got, "first\nsecond\n")
	}
}

func TestWriteNoteWithoutFile(t *testing.T) {
	srv, id := serve(t, "")
	if got := call(t.Context(), srv, id, "write_note", `{"text":"x"}`); got.Code() != tool.CodeToolError {
		t.Errorf("Call(write_note) = %+v, want a tool error", got)
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	res, cancel, srv, id := sleepInFlight(t, `{"ms":60000}`)
	cancel() // as a cancelled batch does: toolsd tells the provider to stop
	// The tool reports that it stopped because it was told to, not a failure of its own.
	if got := <-res; got.Code() != tool.CodeAborted {
		t.Errorf("Call(sleep 60s) cancelled = %+v, want ABORTED", got)
	}
	// The provider keeps serving; and since Serve waits for every handler, the
	// test's cleanup would hang if sleep ignored its cancelled context.
	if got := call(t.Context(), srv, id, "echo", `{"text":"next"}`); got.Content != "next" {
		t.Errorf("Call(echo) after cancellation = %+v", got)
	}
}

func TestSchemasAndDefinitions(t *testing.T) {
	want := map[string]string{
		"echo":          `{"type":"object","properties":{"text":{"type":"string","description":"The text to return unchanged."}},"required":["text"]}`,
		"add":           `{"type":"object","properties":{"a":{"type":"number","description":"The first addend."},"b":{"type":"number","description":"The second addend."}},"required":["a","b"]}`,
		"sleep":         `{"type":"object","properties":{"ms":{"type":"integer","description":"How long to sleep, in milliseconds.","minimum":0}},"required":["ms"]}`,
		"fail":          `{"type":"object","properties":{"message":{"type":"string","description":"The error message the tool fails with."}},"required":["message"]}`,
		"write_note":    `{"type":"object","properties":{"text":{"type":"string","description":"The note to append, one line."}},"required":["text"]}`,
		"get_db_schema": `{"type":"object","properties":{}}`,
		"query_db":      `{"type":"object","properties":{"sql":{"type":"string","description":"The SQL query to run against the example database."}},"required":["sql"]}`,
	}
	got := map[string]string{}
	for _, tl := range exampletools.Tools("") {
		got[tl.Name()] = tl.Schema()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schemas mismatch (-want +got):\n%s", diff)
	}

	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := provider.New("example")
	p.Add(exampletools.Tools("")...)
	conn := srv.Dial(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, conn) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}()
	<-p.Ready()
	if r, _ := reg.Lookup("", "write_note"); r.Def.Mode != tool.ModeExclusive {
		t.Errorf("write_note mode = %v, want exclusive", r.Def.Mode)
	}
	if r, _ := reg.Lookup("", "query_db"); r.Def.Condition != `session.succeeded("get_db_schema")` {
		t.Errorf("query_db condition = %q", r.Def.Condition)
	}
}
