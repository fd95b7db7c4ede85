package app_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

// TestReloadSwapsPolicy is what SIGHUP does: a new policy governs the next calls; a bad
// one is refused and the running policy stays.
func TestReloadSwapsPolicy(t *testing.T) {
	deny := "policy:\n  rules:\n    - {tool: echo, decision: deny, reason: no echo today}\n"
	e := start(t, deny)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	batch := func(id string) []string {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-reload", Calls: []*toolsdv1.ToolCall{call(id, "echo", `{"text":"x"}`)}}, batchOptions{})
		return resultCodes(out.results)
	}
	if got := batch("c1"); !slices.Equal(got, []string{"DENIED"}) {
		t.Fatalf("before reload: %v, want [DENIED]", got)
	}

	bad, err := config.Parse([]byte(baseConfig+"policy:\n  rules:\n    - {tool: echo, decision: maybe}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml:") {
		t.Errorf("Reload(bad policy) = %v, want an error naming bad.yaml's line", err)
	}
	if got := batch("c2"); !slices.Equal(got, []string{"DENIED"}) {
		t.Errorf("after a refused reload: %v, want the old policy ([DENIED])", got)
	}

	good, err := config.Parse([]byte(baseConfig), "good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(good); err != nil {
		t.Fatalf("Reload(good) = %v", err)
	}
	if got := batch("c3"); !slices.Equal(got, []string{""}) {
		t.Errorf("after reload: %v, want echo allowed", got)
	}
}

// TestReloadRefusesAnAuthSectionAStartWouldRefuse: a reload applies only the policy,
// but the file is the one the next start reads: an auth section toolsd cannot start
// with (grants without an authentication method, an agent grant without scopes, TLS
// without a key, a token file that cannot be read) is refused now, naming the problem, and the running
// policy stays.
func TestReloadRefusesAnAuthSectionAStartWouldRefuse(t *testing.T) {
	deny := "policy:\n  rules:\n    - {tool: echo, decision: deny, reason: no echo today}\n"
	e := start(t, deny)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	missing := filepath.Join(t.TempDir(), "missing-tokens.txt")
	for name, tc := range map[string]struct{ auth, want string }{
		"grants without a method": {
			auth: "auth:\n  grants:\n    - {identity: bob, role: operator}\n",
			want: "an authentication method: auth.tls.client_ca_file",
		},
		"agent grant without scopes": {
			auth: "auth:\n  token_file: " + missing + "\n  grants:\n    - {identity: bob, role: agent}\n",
			want: "needs scopes",
		},
		"tls without a key": {
			auth: "auth:\n  tls: {cert_file: " + missing + "}\n",
			want: `auth.tls.cert_file ("` + missing + `") and auth.tls.key_file ("") must both be set`,
		},
		"unreadable token file": {
			auth: "auth:\n  token_file: " + missing + "\n  grants:\n    - {identity: bob, role: operator}\n",
			want: "missing-tokens.txt",
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(baseConfig+tc.auth), "reload.yaml")
			if err == nil { // as on SIGHUP: what the config refuses never reaches Reload
				err = e.app.Reload(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse and Reload(%s) = %v, want an error containing %q", name, err, tc.want)
			}
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-" + strings.ReplaceAll(name, " ", "-"),
				Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"x"}`)}}, batchOptions{})
			if got := resultCodes(out.results); !slices.Equal(got, []string{"DENIED"}) {
				t.Errorf("echo after the refused reload: %v, want [DENIED] (the running policy)", got)
			}
		})
	}
}

// TestReloadRefusesPinsAStartWouldRefuse: a reload that turns registry.pinning on beside
// a durable log is refused when the pin file the next start would read is damaged, and
// accepted once it is moved away. The check only reads: it leaves the files of a save
// in progress alone.
func TestReloadRefusesPinsAStartWouldRefuse(t *testing.T) {
	e := start(t, "")
	dir := t.TempDir()
	pins := filepath.Join(dir, "pins.json")
	if err := os.WriteFile(pins, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	saving := filepath.Join(dir, "pins.json.tmp-42")
	if err := os.WriteFile(saving, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ndata_dir: "+dir+
		"\nsession: {store: bolt}\nregistry: {pinning: refuse}\n"), "pins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(cfg); err == nil || !strings.Contains(err.Error(), "is not a pin file") {
		t.Errorf("Reload(pinning on, damaged pin file) = %v, want the start's refusal", err)
	}
	if _, err := os.Stat(saving); err != nil {
		t.Errorf("the reload's check removed a save's file: %v", err)
	}
	if err := os.Remove(pins); err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(cfg); err != nil {
		t.Errorf("Reload(pinning on, no pin file) = %v, want nil", err)
	}
}

// TestReloadRefusesAuthUnderTheExampleProvider: the bundled example provider dials
// without credentials, so a start with it refuses an auth section. A reload of a file
// that adds one is refused as well, naming the example provider, rather than applied
// with a warning and then refused by the next start; the running policy stays.
func TestReloadRefusesAuthUnderTheExampleProvider(t *testing.T) {
	deny := "policy:\n  rules:\n    - {tool: echo, decision: deny, reason: no echo today}\n"
	cfg, err := config.Parse([]byte(baseConfig+deny), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := runApp(t, cfg, app.WithExampleProvider(filepath.Join(t.TempDir(), "notes.txt")))
	conn := dial(t, a.Addr())
	e := &env{app: a, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	waitFor(t, "the example tools", func() bool { return slices.Contains(e.schemaNames(t, ""), "echo") })

	withAuth, err := config.Parse([]byte(baseConfig+tenantAuth(t)), "reload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(withAuth); err == nil || !strings.Contains(err.Error(), "example provider") {
		t.Errorf("Reload(auth on) under -example-provider = %v, want the auth section refused naming the example provider", err)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-example-reload", Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"x"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"DENIED"}) {
		t.Errorf("echo after the refused reload: %v, want [DENIED] (the running policy)", got)
	}
}

// TestReloadMetrics: /metrics says whether the policy on disk is the policy in force.
// From the start, which loaded the config, the last reload reads successful at the
// start's time and no reload is counted; a refused reload (a bad rule, or a file that
// does not load) counts a failure and sets last_reload_successful to 0, keeping the
// last success's time; a reload that succeeds counts, sets it back to 1 and moves the
// time.
func TestReloadMetrics(t *testing.T) {
	started := float64(time.Now().UnixNano()) / 1e9
	e := start(t, "")
	type reading struct{ success, failure, ok, since float64 }
	read := func() reading {
		t.Helper()
		_, body := scrape(t, e.app.AdminAddr(), "/metrics")
		return reading{
			success: sample(t, body, `toolsd_config_reloads_total{result="success"}`),
			failure: sample(t, body, `toolsd_config_reloads_total{result="failure"}`),
			ok:      sample(t, body, "toolsd_config_last_reload_successful"),
			since:   sample(t, body, "toolsd_config_last_reload_success_timestamp_seconds"),
		}
	}
	atStart := read()
	if want := (reading{0, 0, 1, atStart.since}); atStart != want || atStart.since < started {
		t.Fatalf("at start: %+v, want %+v with a time from %v on", atStart, want, started)
	}

	bad, err := config.Parse([]byte(baseConfig+"policy:\n  rules:\n    - {tool: echo, decision: maybe}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(bad); err == nil {
		t.Fatal("Reload(bad rule) = nil, want an error")
	}
	if got, want := read(), (reading{0, 1, 0, atStart.since}); got != want {
		t.Errorf("after a refused reload: %+v, want %+v", got, want)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := e.app.ReloadFile(missing); err == nil {
		t.Fatalf("ReloadFile(%s) = nil, want an error", missing)
	}
	if got, want := read(), (reading{0, 2, 0, atStart.since}); got != want {
		t.Errorf("after a file that does not load: %+v, want %+v", got, want)
	}

	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.ReloadFile(good); err != nil {
		t.Fatalf("ReloadFile(good) = %v", err)
	}
	after := read()
	if want := (reading{1, 2, 1, after.since}); after != want || after.since < atStart.since {
		t.Errorf("after a reload: %+v, want %+v with a time from %v on", after, want, atStart.since)
	}
}

// sample is the value of the sample named name (with its labels, as /metrics writes
// them) in body, a scrape of /metrics.
func sample(t *testing.T, body, name string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s:\n%s", name, body)
	return 0
}

// TestReloadRefusesTracingAStartWouldRefuse: a reload that turns tracing.enabled on is
// refused when the OTEL_* variables toolsd runs with name an exporter or describe a
// resource that the next start, which builds them, would refuse; the running policy
// stays. With variables a start accepts, the same file reloads.
func TestReloadRefusesTracingAStartWouldRefuse(t *testing.T) {
	deny := "policy:\n  rules:\n    - {tool: echo, decision: deny, reason: no echo today}\n"
	e := start(t, deny)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	traced, err := config.Parse([]byte(baseConfig+"tracing: {enabled: true}\n"), "tracing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][2]string{
		"unknown exporter":     {"OTEL_TRACES_EXPORTER", "bogus"},
		"malformed attributes": {"OTEL_RESOURCE_ATTRIBUTES", "team=tools,orphan"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", "none")
			t.Setenv(env[0], env[1])
			if _, err := app.New(traced); err == nil {
				t.Fatalf("app.New(tracing on, %s=%s) = nil, want the start refused", env[0], env[1])
			}
			if err := e.app.Reload(traced); err == nil || !strings.Contains(err.Error(), "tracing.enabled") {
				t.Errorf("Reload(tracing on, %s=%s) = %v, want it refused naming tracing.enabled", env[0], env[1], err)
			}
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-tracing-" + strings.ReplaceAll(name, " ", "-"),
				Calls: []*toolsdv1.ToolCall{call("c1", "echo", `{"text":"x"}`)}}, batchOptions{})
			if got := resultCodes(out.results); !slices.Equal(got, []string{"DENIED"}) {
				t.Errorf("echo after the refused reload: %v, want [DENIED] (the running policy)", got)
			}
		})
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if err := e.app.Reload(traced); err != nil {
		t.Errorf("Reload(tracing on, OTEL_TRACES_EXPORTER=none) = %v, want nil", err)
	}
}
