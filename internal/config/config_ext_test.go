package config_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/config"
)

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := config.Load("")
	if err != nil {
		t.Fatalf("Load(defaults) = %v", err)
	}
	if cfg.Runtime.GCPercent != 400 || cfg.Runtime.MemoryLimit != 0 {
		t.Errorf("runtime defaults = %+v, want gc_percent 400 and no memory limit", cfg.Runtime)
	}
}

func TestFlowControlWindows(t *testing.T) {
	cfg, err := config.Parse(nil, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.StreamWindow != 1<<20 || cfg.Limits.ConnectionWindow != 4<<20 {
		t.Errorf("windows = %d / %d, want 1MiB / 4MiB by default", cfg.Limits.StreamWindow, cfg.Limits.ConnectionWindow)
	}
	accepted(t, "limits: {stream_window: 0, connection_window: 0}\n")
	refusedAll(t, map[string]string{
		"limits: {stream_window: 1KiB, connection_window: 4MiB}\n":   "limits.stream_window: must be at least 64KiB and under 2GiB",
		"limits: {stream_window: 2GiB, connection_window: 2GiB}\n":   "limits.stream_window: must be at least 64KiB and under 2GiB",
		"limits: {stream_window: 1MiB, connection_window: 512KiB}\n": "limits.connection_window: limits.connection_window (524288 bytes) must be at least limits.stream_window (1048576 bytes)",
		"limits: {connection_window: 3GiB}\n":                        "limits.connection_window: must be under 2GiB",
		"limits: {stream_window: 1MiB, connection_window: 0}\n":      "limits.stream_window: limits.stream_window (1048576 bytes) and limits.connection_window (0 bytes) must both be 0",
		"limits: {stream_window: 0}\n":                               "limits.stream_window: limits.stream_window (0 bytes) and limits.connection_window (4194304 bytes) must both be 0",
	})
}

func TestRuntimeSection(t *testing.T) {
	cfg, err := config.Parse([]byte("runtime: {gc_percent: 150, memory_limit: 2GiB}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Runtime.GCPercent != 150 || cfg.Runtime.MemoryLimit != 2<<30 {
		t.Errorf("runtime = %+v, want gc_percent 150, memory_limit 2GiB", cfg.Runtime)
	}
	refusedAll(t, map[string]string{
		"runtime: {gc_percent: 0}\n":      "runtime.gc_percent: must be positive",
		"runtime: {gc_percent: -5}\n":     "runtime.gc_percent: must be positive",
		"runtime: {memory_limit: -1}\n":   `t.yaml:1:25: runtime.memory_limit: want a byte count like 1048576 or "1MiB", got -1`,
		"runtime: {memory_limit: lots}\n": `t.yaml:1:25: runtime.memory_limit: want a byte count like 1048576 or "1MiB", got "lots"`,
		// The runtime takes an int32: 2^31 would be negative (the collector off), 2^32+100 100.
		"runtime: {gc_percent: 2147483648}\n": "t.yaml:1:23: runtime.gc_percent: 2147483648, over the most, 2147483647",
		"runtime: {gc_percent: 4294967396}\n": "t.yaml:1:23: runtime.gc_percent: 4294967396, over the most, 2147483647",
	})
	accepted(t, "runtime: {gc_percent: 2147483647}\n")
}

// TestZeroableDurations checks the durations where 0 turns a feature off: their
// defaults, 0 accepted, a negative value refused by name.
func TestZeroableDurations(t *testing.T) {
	def, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		section, key string
		get          func(*config.Config) time.Duration
		want         time.Duration
	}{
		{"session", "coalesce", func(c *config.Config) time.Duration { return c.Session.Coalesce.D() }, 5 * time.Millisecond},
		{"limits", "accepted_hold", func(c *config.Config) time.Duration { return c.Limits.AcceptedHold.D() }, 5 * time.Millisecond},
		{"limits", "cancel_grace", func(c *config.Config) time.Duration { return c.Limits.CancelGrace.D() }, 2 * time.Second},
	} {
		name := d.section + "." + d.key
		if got := d.get(def); got != d.want {
			t.Errorf("%s default = %v, want %v", name, got, d.want)
		}
		cfg, err := config.Parse([]byte(d.section+": {"+d.key+": 0s}\n"), "t.yaml")
		if err != nil || d.get(cfg) != 0 {
			t.Errorf("Parse(%s: 0s) = %v, want 0 accepted", name, err)
		}
		refused(t, d.section+": {"+d.key+": -1ms}\n", name)
	}
	refused(t, "limits: {accepted_hold: 2m}\n", "limits.accepted_hold") // at most 1m
	accepted(t, "limits: {accepted_hold: 1m}\n")
	refused(t, "limits: {max_result_bytes: 9MiB}\n", "limits.max_result_bytes") // at most 8MiB
	accepted(t, "limits: {max_result_bytes: 8MiB}\n")
	for _, bad := range []string{"2m", "-1s"} {
		refused(t, "limits: {cancel_grace: "+bad+"}\n", "limits.cancel_grace")
	}
	for _, bad := range []string{"5m", "2s", "-1ms"} {
		refused(t, "session: {coalesce: "+bad+"}\n", "session.coalesce")
	}
	accepted(t, "session: {coalesce: 1s}\n")
}

// TestHookLimits checks the two hook caps: their defaults, an override, and a cap of 0
// (which would refuse every hook) refused by name.
func TestHookLimits(t *testing.T) {
	def, err := config.Parse(nil, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if def.Limits.MaxHooks != 100 || def.Limits.MaxScopedHooks != 100 {
		t.Errorf("hook limits = %d / %d, want 100 / 100 by default", def.Limits.MaxHooks, def.Limits.MaxScopedHooks)
	}
	cfg, err := config.Parse([]byte("limits: {max_hooks: 4, max_scoped_hooks: 20}\n"), "t.yaml")
	if err != nil {
		t.Fatalf("Parse(hook limits) = %v", err)
	}
	if cfg.Limits.MaxHooks != 4 || cfg.Limits.MaxScopedHooks != 20 {
		t.Errorf("hook limits = %d / %d, want 4 / 20", cfg.Limits.MaxHooks, cfg.Limits.MaxScopedHooks)
	}
	if def.Limits.MaxHooksPerIdentity != 10 {
		t.Errorf("max_hooks_per_identity = %d, want 10 by default", def.Limits.MaxHooksPerIdentity)
	}
	if def.Limits.MaxProvidersPerIdentity != 100 {
		t.Errorf("max_providers_per_identity = %d, want 100 by default", def.Limits.MaxProvidersPerIdentity)
	}
	if def.Limits.MaxHookContexts != 16 || def.Limits.MaxHookContextBytes != 64<<10 {
		t.Errorf("max_hook_contexts / max_hook_context_bytes = %d / %d, want 16 / 64KiB by default", def.Limits.MaxHookContexts, def.Limits.MaxHookContextBytes)
	}
	refused(t, "limits: {max_hook_context_bytes: 9MiB}\n", "limits.max_hook_context_bytes")
	if def.Limits.MaxBatchContextBytes != 1<<20 {
		t.Errorf("max_batch_context_bytes = %d, want 1MiB by default", def.Limits.MaxBatchContextBytes)
	}
	refused(t, "limits: {max_batch_context_bytes: 9MiB}\n", "limits.max_batch_context_bytes")
	for _, key := range []string{"max_hooks", "max_scoped_hooks", "max_hooks_per_identity", "max_providers_per_identity", "max_hook_contexts", "max_hook_context_bytes", "max_batch_context_bytes"} {
		refused(t, "limits: {"+key+": 0}\n", "limits."+key+": must be positive")
	}
}

// TestRequiredHooks: none by default; a requirement is taken with its fields, and one
// the hub could not meet (no name, a stage without a verdict, a bad glob) is refused at
// its place.
func TestRequiredHooks(t *testing.T) {
	def := accepted(t, "")
	if def != nil && len(def.Hooks.Required) != 0 {
		t.Errorf("hooks.required = %v, want none by default", def.Hooks.Required)
	}
	cfg := accepted(t, "hooks:\n  required:\n    - {name: policy, stage: pre_execute, tool: \"fs_*\", scope: \"tenant-a/**\"}\n")
	want := []config.RequiredHook{{Name: "policy", Stage: "pre_execute", Tool: "fs_*", Scope: "tenant-a/**"}}
	if cfg != nil && !slices.Equal(cfg.Hooks.Required, want) {
		t.Errorf("hooks.required = %v, want %v", cfg.Hooks.Required, want)
	}
	refusedAll(t, map[string]string{
		"hooks:\n  required:\n    - {stage: pre_execute}\n":                        `t.yaml:3:7: hooks.required[0]: name "" is not a hook's name`,
		"hooks:\n  required:\n    - {name: audit, stage: result}\n":                `t.yaml:3:7: hooks.required[0]: stage "result" is not pre_execute or post_execute`,
		"hooks:\n  required:\n    - {name: p, stage: post_execute, tool: \"[\"}\n": `t.yaml:3:7: hooks.required[0]: tool glob "["`,
	})
}

// TestRequiredHookGlobsThatMatchNothing: a requirement whose tool or scope glob no tool
// name or scope can match covers no call, so the calls its operator meant it to guard
// would run without the hook. It is refused at its place, as a policy rule with such a
// pattern is; it was accepted.
func TestRequiredHookGlobsThatMatchNothing(t *testing.T) {
	refusedAll(t, map[string]string{
		"hooks:\n  required:\n    - {name: p, stage: pre_execute, tool: \"fs read\"}\n":       `t.yaml:3:7: hooks.required[0]: tool glob "fs read": no tool can have this name`,
		"hooks:\n  required:\n    - {name: p, stage: pre_execute, tool: \"fs:*\"}\n":          `t.yaml:3:7: hooks.required[0]: tool glob "fs:*": can never match`,
		"hooks:\n  required:\n    - {name: p, stage: pre_execute, scope: \"/tenant-a/**\"}\n": `t.yaml:3:7: hooks.required[0]: scope glob "/tenant-a/**": can never match`,
		"hooks:\n  required:\n    - {name: p, stage: pre_execute, scope: \"tenant a/**\"}\n":  `t.yaml:3:7: hooks.required[0]: scope glob "tenant a/**": can never match`,
	})
	for _, ok := range []string{`tool: ""`, `tool: "*"`, `scope: ""`, `scope: "*"`, `scope: "**"`, `tool: "fs_*", scope: "tenant-a/**"`} {
		accepted(t, "hooks:\n  required:\n    - {name: p, stage: pre_execute, "+ok+"}\n")
	}
}

func TestSessionHotFor(t *testing.T) {
	cfg, err := config.Parse(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Session.HotFor.D(); got != 5*time.Minute {
		t.Errorf("session.hot_for default = %v, want 5m", got)
	}
	refused(t, "session: {hot_for: -1s}\n", "session.hot_for")
}

// TestRefusedValues: values that would silently turn a feature off or be replaced by a
// default are refused at start-up, naming the key; an unknown key is named in the
// config's terms, with its place.
func TestRefusedValues(t *testing.T) {
	refusedAll(t, map[string]string{
		"session: {retention: {interval: 0s}}\n":     "session.retention.interval: must be positive",
		"session: {retention: {max_sessions: -1}}\n": "session.retention.max_sessions: must not be negative",
		"session: {retention: {max_age: -1h}}\n":     "session.retention.max_age: must not be negative",
		"registry: {tool_set_idle: 0s}\n":            "registry.tool_set_idle: must be positive",
		"scheduler:\n  max_threads: 3\n":             "t.yaml:2:3: scheduler.max_threads: unknown key",
		"limits: {outbox: 1}\nlog: {colour: red}\n":  "t.yaml:1:10: limits.outbox: unknown key; t.yaml:2:7: log.colour: unknown key",
		"retry: {base_delay: 3s, max_delay: 2s}\n":   "retry.base_delay: retry.base_delay (3s) is over retry.max_delay (2s)",
		"retry: {budget: 40ms, base_delay: 100ms}\n": "retry.budget: retry.budget (40ms) is under half of retry.base_delay (100ms), the shortest wait before a retry",
		"limits: {outbox_size: 100000000}\n":         "limits.outbox_size: 100000000, over the most, 65536",
		"limits: {max_json_depth: 1000000}\n":        "limits.max_json_depth: 1000000, over the most, 10000",
	})
}

// TestNotReloaded names the keys a reload, which applies the policy and the auth
// section's grants and files, leaves for the next start: the other top-level keys, the
// grants of a reload that would turn authentication on or off, and the auth keys of a
// reload that would turn authentication or client certificates on or off.
func TestNotReloaded(t *testing.T) {
	parse := func(text string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(text), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const grants = "  grants: [{identity: a, role: operator}]\n"
	before := parse("limits: {write_timeout: 5s}\npolicy: {rules: [{tool: \"*\", action: allow}]}\nauth:\n  token_file: t1\n" + grants)
	withTLS := parse("limits: {write_timeout: 5s}\nauth:\n  tls: {cert_file: c, key_file: k}\n  token_file: t1\n" + grants)
	for name, tc := range map[string]struct {
		text string
		want []string
	}{
		"the policy": {"limits: {write_timeout: 5s}\npolicy: {rules: [{tool: \"*\", action: deny}]}\nauth:\n  token_file: t1\n" + grants, nil},
		"listen and limits": {"limits: {write_timeout: 6s}\nlisten: 127.0.0.1:1\npolicy: {rules: [{tool: \"*\", action: allow}]}\nauth:\n  token_file: t1\n" + grants,
			[]string{"listen", "limits"}},
		"the token file and jwt keys": {"limits: {write_timeout: 5s}\nauth:\n  token_file: t2\n  jwks_file: j\n  jwt: {audience: toolsd}\n" + grants, nil},
		"the grants":                  {"limits: {write_timeout: 5s}\nauth:\n  token_file: t1\n  grants: [{identity: b, role: operator}]\n", nil},
		"auth turned off":             {"limits: {write_timeout: 5s}\n", []string{"auth.token_file", "auth.grants"}},
		"the tls files":               {"limits: {write_timeout: 5s}\nauth:\n  tls: {cert_file: c2, key_file: k2}\n  token_file: t1\n" + grants, nil},
		"tls turned on": {"limits: {write_timeout: 5s}\nauth:\n  tls: {cert_file: c, key_file: k}\n  token_file: t1\n" + grants,
			[]string{"auth.tls.cert_file", "auth.tls.key_file"}},
		"client certificates turned on": {"limits: {write_timeout: 5s}\nauth:\n  tls: {cert_file: c, key_file: k, client_ca_file: ca}\n  token_file: t2\n" + grants,
			[]string{"auth.tls.cert_file", "auth.tls.key_file", "auth.tls.client_ca_file", "auth.token_file"}},
		// The same paths, whose files the reload does not read again: a certificate
		// renewed in c, or a token revoked in t1, is not in force either.
		"client certificates turned on beside tls": {"limits: {write_timeout: 5s}\nauth:\n  tls: {cert_file: c, key_file: k, client_ca_file: ca}\n  token_file: t1\n" + grants,
			[]string{"auth.tls.cert_file", "auth.tls.key_file", "auth.tls.client_ca_file", "auth.token_file"}},
	} {
		from := before
		if name == "the tls files" || name == "client certificates turned on beside tls" {
			from = withTLS
		}
		if got := config.NotReloaded(from, parse(tc.text)); !slices.Equal(got, tc.want) {
			t.Errorf("NotReloaded(%s changed) = %v, want %v", name, got, tc.want)
		}
	}
}

// TestSizeOverflow: a size whose unit multiplies it past int64 is refused, not wrapped
// around (17179869185GiB would be 1GiB, 8589934592GiB negative).
func TestSizeOverflow(t *testing.T) {
	for _, in := range []string{
		"runtime: {memory_limit: 17179869185GiB}\n",
		"limits: {max_request_bytes: 8589934592GiB}\n",
	} {
		_, err := config.Parse([]byte(in), "t.yaml")
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "t.yaml:1:") || !strings.Contains(err.Error(), `GiB" (too large)`) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid naming the size and its place", in, err)
		}
	}
	if _, err := config.ParseSize("8191PiB"); err == nil {
		t.Error(`ParseSize("8191PiB") = nil error, want one (no such unit)`)
	}
	if n, err := config.ParseSize("8589934591GiB"); err != nil || n != 8589934591<<30 {
		t.Errorf(`ParseSize("8589934591GiB") = %d, %v, want %d`, n, err, int64(8589934591)<<30)
	}
}

// TestEmptyListenRefused: an empty gRPC address would listen on a random port of every
// interface; only admin_listen may be empty (no admin endpoints).
func TestEmptyListenRefused(t *testing.T) {
	refused(t, "listen: \"\"\n", "t.yaml:1:9: listen: must not be empty")
	accepted(t, "admin_listen: \"\"\n")
}

// TestListenAndAdminListenDiffer: the admin HTTP listener cannot share the gRPC port,
// and failing to bind it would blame another process ("address already in use") when
// the config asks for the same port twice. Port 0 picks a free port for each.
func TestListenAndAdminListenDiffer(t *testing.T) {
	for _, text := range []string{
		"listen: 127.0.0.1:50151\nadmin_listen: 127.0.0.1:50151\n",
		"listen: 0.0.0.0:50151\nadmin_listen: 127.0.0.1:50151\n",
		"listen: 127.0.0.1:9151\n", // the default admin_listen
		"listen: \"[::1]:50151\"\nadmin_listen: \":50151\"\n",
		"listen: 127.0.0.1:50151\nadmin_listen: 127.0.0.1:050151\n", // one port, spelled twice
		"listen: 127.0.0.1:80\nadmin_listen: 127.0.0.1:http\n",
	} {
		refused(t, text, "is listen's port")
		refused(t, text, "admin_listen (")
	}
	for _, text := range []string{
		"listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n",
		"listen: 127.0.0.1:50151\nadmin_listen: 127.0.0.2:50151\n",
		"listen: 127.0.0.1:50151\nadmin_listen: \"\"\n",
		"listen: \"127.0.0.1:\"\nadmin_listen: \"127.0.0.1:\"\n", // no port is port 0
	} {
		accepted(t, text)
	}
}

// TestListenAndAdminListenOnLocalhost: "localhost" is the address net.Listen binds for
// it, so an admin_listen naming it with listen's port on that address is refused at
// load, as the same address written twice is; it was taken for another host, and the
// start failed at the admin listener saying that another process listened there.
func TestListenAndAdminListenOnLocalhost(t *testing.T) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Skipf("no localhost here: %v", err)
	}
	ip := l.Addr().(*net.TCPAddr).IP
	_ = l.Close()
	at := net.JoinHostPort(ip.String(), "50151")
	refused(t, "listen: \""+at+"\"\nadmin_listen: localhost:50151\n", "is listen's port")
	refused(t, "listen: LocalHost:50151\nadmin_listen: \""+at+"\"\n", "is listen's port")
	accepted(t, "listen: localhost:50151\nadmin_listen: localhost:9151\n")
}

// TestListenPortRefusedAtLoad: a port net.Listen cannot bind (out of range, not a
// number or a known service) is refused with the key's place, as other values out of
// range are; it failed only at the listener, and a reload took it as a key for the next
// start, which would then refuse it.
func TestListenPortRefusedAtLoad(t *testing.T) {
	refusedAll(t, map[string]string{
		"listen: 127.0.0.1:99999\n":      "t.yaml:1:9: listen: port 99999 is not a port number (0 to 65535) or a service name",
		"listen: 127.0.0.1:-1\n":         "t.yaml:1:9: listen: port -1 is not a port number",
		"admin_listen: 127.0.0.1:nope\n": "t.yaml:1:15: admin_listen: port nope is not a port number",
	})
	for _, text := range []string{
		"listen: 127.0.0.1:65535\n",
		"listen: 127.0.0.1:0\nadmin_listen: \"[::1]:0\"\n",
		"admin_listen: 127.0.0.1:https\n",
	} {
		accepted(t, text)
	}
}

// TestRetryBudgetUnderTheBaseDelay: the first retry waits between half the base delay
// and the whole of it (jitter), so a budget in that range still lets retries start; only
// one under half the base delay leaves none.
func TestRetryBudgetUnderTheBaseDelay(t *testing.T) {
	accepted(t, "retry: {budget: 80ms, base_delay: 100ms}\n")
}

// TestDecodeErrorsNameKeyAndPlace: a value of the wrong type or format, and an unknown
// key, are reported as the policy's errors are: file:line:column, then the key's dotted
// path, so that a flow mapping with several keys on one line still says which one, and
// what the key wants and what the file wrote in the config's terms, not Go's (the
// decoder's "cannot unmarshal !!int `5` into config.Scheduler", time's "missing unit in
// duration").
func TestDecodeErrorsNameKeyAndPlace(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits:\n  max_calls_per_batch: abc\n":                                 `t.yaml:2:24: limits.max_calls_per_batch: want a whole number, got "abc"`,
		"limits:\n  approval_timeout: 5\n":                                      `t.yaml:2:21: limits.approval_timeout: want a duration like "30s" or "500ms", got 5 (no unit)`,
		"limits: {approval_timeout: 5s, hook_timeout: 5}\n":                     `t.yaml:1:46: limits.hook_timeout: want a duration like "30s" or "500ms", got 5 (no unit)`,
		"limits:\n  approval_timeout: abc\n":                                    `t.yaml:2:21: limits.approval_timeout: want a duration like "30s" or "500ms", got "abc"`,
		"limits: {max_request_bytes: 1MiB, max_schema_bytes: -5}\n":             `t.yaml:1:53: limits.max_schema_bytes: want a byte count like 1048576 or "1MiB", got -5`,
		"limits:\n  max_request_bytes: 1MB\n":                                   `t.yaml:2:22: limits.max_request_bytes: want a byte count like 1048576 or "1MiB", got "1MB"`,
		"limits:\n  max_concurrent_streams: -1\n":                               "t.yaml:2:27: limits.max_concurrent_streams: want a whole number from 0 to 4294967295, got -1",
		"limits:\n  outbox_size: 99999999999999999999\n":                        "t.yaml:2:16: limits.outbox_size: want a whole number, got 99999999999999999999 (out of range)",
		"limits: {max_calls_per_batch: 8, outbox_size: 99999999999999999999}\n": "t.yaml:1:47: limits.outbox_size: want a whole number, got 99999999999999999999 (out of range)",
		"session:\n  retention: 5\n":                                            "t.yaml:2:14: session.retention: want a mapping of keys, got 5",
		"auth: {tls: [a]}\n":                                                    "t.yaml:1:13: auth.tls: want a mapping of keys, got a list",
		"scheduler: 5\n":                                                        "t.yaml:1:12: scheduler: want a mapping of keys, got 5",
		"limits: [1]\n":                                                         "t.yaml:1:9: limits: want a mapping of keys, got a list",
		"5\n":                                                                   "t.yaml:1:1: want a mapping of keys, got 5",
		"log:\n  payloads: maybe\n":                                             `t.yaml:2:13: log.payloads: want true or false, got "maybe"`,
		"log: {level: [debug]}\n":                                               "t.yaml:1:14: log.level: want text, got a list",
		"auth: {grants: 5}\n":                                                   "t.yaml:1:16: auth.grants: want a list, got 5",
		"auth: {grants: [5]}\n":                                                 "t.yaml:1:17: auth.grants[0]: want a mapping of keys, got 5",
		"auth:\n  grants: [{identity: a, scopes: b}]\n":                         `t.yaml:2:34: auth.grants[0].scopes: want a list, got "b"`,
		"scheduler:\n  max_threads: 3\n":                                        "t.yaml:2:3: scheduler.max_threads: unknown key",
		"auth:\n  grants:\n    - {identity: a, rol: agent}\n":                   "t.yaml:3:21: auth.grants[0].rol: unknown key",
	})
}

// TestListOrMappingForADurationOrSize: a list or a mapping where a duration or a size
// belongs is refused as not one, as an integer key refuses it ("cannot unmarshal !!seq");
// the refusal quoted an empty text (time: invalid duration ""), which the file does not
// hold.
func TestListOrMappingForADurationOrSize(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits:\n  approval_timeout: [1s]\n":    `t.yaml:2:21: limits.approval_timeout: want a duration like "30s" or "500ms", got a list`,
		"limits:\n  approval_timeout: {a: 1s}\n": `t.yaml:2:21: limits.approval_timeout: want a duration like "30s" or "500ms", got a mapping`,
		"limits:\n  max_request_bytes: [1MiB]\n": `t.yaml:2:22: limits.max_request_bytes: want a byte count like 1048576 or "1MiB", got a list`,
		"runtime:\n  memory_limit: {a: 1}\n":     `t.yaml:2:17: runtime.memory_limit: want a byte count like 1048576 or "1MiB", got a mapping`,
	})
}

// TestValueErrorsAreLocated: a value the YAML types accept but Validate refuses is
// reported at its place in the file, as a decoding error is.
func TestValueErrorsAreLocated(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits: {outbox_size: 0}\n":                          "t.yaml:1:23: limits.outbox_size: must be positive",
		"log:\n  level: loud\n":                               `t.yaml:2:10: log.level: "loud" is not one of`,
		"retry:\n  base_delay: 5s\n  max_delay: 1s\n":         "t.yaml:2:15: retry.base_delay: retry.base_delay (5s) is over retry.max_delay (1s) (retry.max_delay: t.yaml:3:14)",
		"auth:\n  grants:\n    - {identity: a, role: boss}\n": "t.yaml:3:27: auth.grants[0].role:",
		"data_dir: \"\"\n":                                    `t.yaml:1:11: data_dir: data_dir ("") must not be empty with a durable session.store ("bolt")`,
	})
	// A check of two values where the file sets one: reported at the one it sets.
	_, err := config.Parse([]byte("retry: {base_delay: 1h}\n"), "t.yaml")
	if want := "t.yaml:1:21: retry.base_delay: retry.base_delay (1h0m0s) is over retry.max_delay (2s)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse = %v, want %q", err, want)
	}
}

// TestEmptyValuesAreRefused: a key written with no value decodes as YAML null, which
// leaves the field as it was; a config that says "outbox_size:" would run with the
// default without a word. Such a key is an error that says where.
func TestEmptyValuesAreRefused(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits:\n  outbox_size:\n":   "t.yaml:2:3: limits.outbox_size: has no value",
		"listen: ~\n":                 "t.yaml:1:1: listen: has no value",
		"log: {level: null}\n":        "t.yaml:1:7: log.level: has no value",
		"session:\n  retention:\n":    "t.yaml:2:3: session.retention: has no value",
		"auth:\n  grants:\n    - ~\n": "t.yaml:3:7: auth.grants[0]: has no value",
	})
	// An empty string is a value: admin_listen "" turns the admin listener off, and
	// the memory store needs no data_dir.
	accepted(t, "data_dir: \"\"\nsession: {store: memory}\n")
	cfg, err := config.Parse([]byte("admin_listen: \"\"\n"), "t.yaml")
	if err != nil || cfg.AdminListen != "" {
		t.Errorf(`Parse(admin_listen: "") = %+v, %v; want no admin listener`, cfg, err)
	}
}

// TestLoadOverrides: overrides (the command line's flags) apply before validation, so a
// file's value they replace is not refused (data_dir "" is unused by the memory store);
// a bad value an override sets is reported as its source's, a bad value the file sets
// still at its place in the file.
func TestLoadOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(path, []byte("data_dir: \"\"\nlisten: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := func(key string, f func(*config.Config)) config.Override {
		return config.Override{Key: key, Source: "command line", Set: f}
	}
	memory := set("session.store", func(c *config.Config) { c.Session.Store = "memory" })
	listen := set("listen", func(c *config.Config) { c.Listen = "127.0.0.1:0" })
	cfg, err := config.Load(path, memory, listen)
	if err != nil {
		t.Fatalf("Load(data_dir \"\", listen \"\"; memory store and listen overridden) = %v", err)
	}
	if cfg.Session.Store != "memory" || cfg.Listen != "127.0.0.1:0" || cfg.Source != path {
		t.Errorf("Load() = store %q, listen %q, source %q; want memory, 127.0.0.1:0, %s", cfg.Session.Store, cfg.Listen, cfg.Source, path)
	}
	_, err = config.Load(path, memory)
	if want := path + ":2:9: listen: must not be empty"; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "data_dir") {
		t.Errorf("Load(listen not overridden) = %v, want only %q", err, want)
	}
	level := set("log.level", func(c *config.Config) { c.Log.Level = "loud" })
	for _, p := range []string{path, ""} {
		_, err = config.Load(p, memory, listen, level)
		if want := `command line: log.level: "loud" is not one of`; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q, -log-level loud) = %v, want %q", p, err, want)
		}
	}
}

// TestOneDocument: a config file is one YAML document. The decoder reads the first and
// stops, so the keys of a second (a policy appended after "---") were dropped unsaid.
func TestOneDocument(t *testing.T) {
	refusedAll(t, map[string]string{
		"listen: 127.0.0.1:1\n---\npolicy: {default: deny}\n": "t.yaml:3:1: a second YAML document",
		"---\nlog: {level: warn}\n---\n---\nlisten: x\n":      "t.yaml:5:1: a second YAML document",
		"---\n---\nlimits: {outbox_size: 8}\n":                "t.yaml:3:1: a second YAML document",
	})
	// Empty documents (a trailing "---") hold no keys to drop.
	for _, in := range []string{"---\nlisten: 127.0.0.1:1\n...\n", "listen: 127.0.0.1:1\n---\n", "listen: 127.0.0.1:1\n---\n# nothing\n---\n"} {
		accepted(t, in)
	}
}

// TestWholeNumbers: the YAML decoder truncates a fraction written for an integer key
// (max_parallel: 1.5 ran with 1); such a value is refused, naming the key, while a
// whole number written as a float (1e2) is that number.
func TestWholeNumbers(t *testing.T) {
	refusedAll(t, map[string]string{
		"scheduler: {max_parallel: 1.5}\n":           "t.yaml:1:27: scheduler.max_parallel: 1.5 is not a whole number",
		"runtime:\n  gc_percent: 150.5\n":            "t.yaml:2:15: runtime.gc_percent: 150.5 is not a whole number",
		"limits: {max_concurrent_streams: 2.5}\n":    "t.yaml:1:34: limits.max_concurrent_streams: 2.5 is not a whole number",
		"session: {retention: {max_sessions: .5}}\n": "t.yaml:1:37: session.retention.max_sessions: .5 is not a whole number",
	})
	cfg, err := config.Parse([]byte("limits: {max_calls_per_batch: 1e2}\n"), "t.yaml")
	if err != nil || cfg.Limits.MaxCallsPerBatch != 100 {
		t.Errorf("Parse(max_calls_per_batch: 1e2) = %v, want 100 accepted", err)
	}
}

// TestDuplicateKeys: a key written twice in one mapping is refused at the second, with
// the key's dotted path, as other decoding errors are; a section written twice was
// reported as "t.yaml: line 3: ..." without a column or path.
func TestDuplicateKeys(t *testing.T) {
	refusedAll(t, map[string]string{
		"listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n":                `t.yaml:2:1: listen: mapping key "listen" already defined at line 1`,
		"limits:\n  outbox_size: 5\nlimits:\n  write_timeout: 1s\n": `t.yaml:3:1: limits: mapping key "limits" already defined at line 1`,
		"limits: {outbox_size: 5, outbox_size: 6}\n":                `t.yaml:1:26: limits.outbox_size: mapping key "outbox_size" already defined at line 1`,
	})
}

// TestLeadingZeros: YAML reads an integer with a leading zero as octal (0100 is 64)
// where sizes, which parse their own text, read it as decimal (0100 bytes is 100), so
// such an integer is refused rather than run as either; 0o100 says octal.
func TestLeadingZeros(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits: {outbox_size: 0100}\n":                   "t.yaml:1:23: limits.outbox_size: 0100 has a leading zero",
		"session:\n  retention:\n    max_sessions: 010\n": "t.yaml:3:19: session.retention.max_sessions: 010 has a leading zero",
		"limits: {max_providers: 0_10}\n":                 "t.yaml:1:25: limits.max_providers: 0_10 has a leading zero",
		"scheduler: {max_parallel: +010}\n":               "t.yaml:1:27: scheduler.max_parallel: +010 has a leading zero",
	})
	in := "limits: {outbox_size: 0o100, max_providers: 0x10, max_request_bytes: 0100}\nsession: {retention: {max_sessions: 0}}\n"
	if cfg := accepted(t, in); cfg != nil && (cfg.Limits.OutboxSize != 64 || cfg.Limits.MaxProviders != 16 || cfg.Limits.MaxRequestBytes != 100) {
		t.Errorf("Parse(%q) = outbox_size %d, max_providers %d, max_request_bytes %d; want 64, 16, 100",
			in, cfg.Limits.OutboxSize, cfg.Limits.MaxProviders, cfg.Limits.MaxRequestBytes)
	}
}

// TestAliasesAndMergeKeys: a value the decoder reads through an alias (*x) or a merge
// key (<<) is checked as one written in place. The checks walked the file as written,
// so a fraction (1.5 ran as 1) or a null (the default kept) reached through one loaded
// unsaid, and a per-identity cap merged in counted as unset, lowered to its total.
func TestAliasesAndMergeKeys(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits:\n  <<: {max_calls_per_batch: 1.5}\n":                                                            "t.yaml:2:29: limits.max_calls_per_batch: 1.5 is not a whole number",
		"policy:\n  rules:\n    - {tool: echo, decision: deny, reason: &r 1.5}\nscheduler: {max_parallel: *r}\n": "t.yaml:4:27: scheduler.max_parallel: 1.5 is not a whole number",
		"policy:\n  rules: &none\nscheduler:\n  max_parallel: *none\n":                                           "t.yaml:4:3: scheduler.max_parallel: has no value",
		"limits:\n  <<: [{outbox_size: 8}, {write_timeout: ~}]\n":                                                "t.yaml:2:27: limits.write_timeout: has no value",
		"limits:\n  <<: {max_providers_per_identity: 50}\n  max_providers: 10\n":                                 "limits.max_providers_per_identity (50) is over limits.max_providers (10)",
	})
	// Keys the mapping sets itself win over merged ones, and earlier merged mappings
	// over later ones, as the decoder takes them.
	in := "auth:\n  token_file: /dev/null\n  grants:\n    - &g {identity: a, role: agent, scopes: [\"x/**\"]}\n    - {<<: *g, identity: b}\n" +
		"limits:\n  max_providers_per_identity: 15\n  <<: [{outbox_size: 8}, {outbox_size: 1.5, max_providers_per_identity: 50.5}]\n"
	cfg := accepted(t, in)
	if cfg != nil && (cfg.Limits.OutboxSize != 8 || cfg.Limits.MaxProvidersPerIdentity != 15 || len(cfg.Auth.Grants) != 2 || cfg.Auth.Grants[1].Identity != "b") {
		t.Errorf("Parse(%q) = outbox_size %d, max_providers_per_identity %d, grants %+v; want 8, 15 and b's merged grant",
			in, cfg.Limits.OutboxSize, cfg.Limits.MaxProvidersPerIdentity, cfg.Auth.Grants)
	}
	// What a merged mapping sets that the mapping sets too is not read, so it is not
	// resolved either: here a list nine to the eighth strings long.
	laughs := "policy:\n  x0: &a [a, a, a, a, a, a, a, a, a]\n"
	for i, name := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		prev := string(rune('a' + i))
		laughs += fmt.Sprintf("  x%d: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", i+1, name, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	accepted(t, laughs+"limits: {outbox_size: 8, <<: {outbox_size: *h}}\n")
}

// TestKeepaliveTimeUnderASecond: gRPC's server pings no more often than once a second
// and raises a shorter keepalive_time to 1s unsaid (in its own log, not toolsd's), so
// such a value is refused rather than run as another.
func TestKeepaliveTimeUnderASecond(t *testing.T) {
	refused(t, "limits:\n  keepalive_time: 200ms\n", "t.yaml:2:19: limits.keepalive_time: 200ms is under 1s")
	accepted(t, "limits: {keepalive_time: 1s}\n")
}

// TestMaxRequestBytesWithinASessionEvent: a call's arguments are logged as sent, up to
// the request's size, in one session log event of at most 16 MiB; a request limit that
// lets one call's arguments past that failed the whole batch at its first append
// ("event too large") instead of giving that call INVALID_ARGUMENTS. It is refused.
func TestMaxRequestBytesWithinASessionEvent(t *testing.T) {
	refused(t, "limits:\n  max_request_bytes: 40MiB\n", "t.yaml:2:22: limits.max_request_bytes: 41943040 bytes, over the most, 15728640 (15MiB")
	accepted(t, "limits: {max_request_bytes: 15MiB}\n")
}

// TestClashingValues: two values valid alone but not together are reported with both
// keys and both values, at the place of the key the file sets (a key left at its
// default has none), and at both places when the file sets both.
func TestClashingValues(t *testing.T) {
	checkCases(t, []struct{ name, in, want string }{
		{"base_delay set", "retry:\n  base_delay: 3s\n",
			"t.yaml:2:15: retry.base_delay: retry.base_delay (3s) is over retry.max_delay (2s)"},
		{"max_delay set", "retry:\n  max_delay: 50ms\n",
			"t.yaml:2:14: retry.max_delay: retry.base_delay (100ms) is over retry.max_delay (50ms)"},
		{"both delays set", "retry:\n  base_delay: 3s\n  max_delay: 2s\n",
			"t.yaml:2:15: retry.base_delay: retry.base_delay (3s) is over retry.max_delay (2s) (retry.max_delay: t.yaml:3:14)"},
		{"budget set", "retry:\n  budget: 40ms\n",
			"t.yaml:2:11: retry.budget: retry.budget (40ms) is under half of retry.base_delay (100ms)"},
		{"base_delay set over budget", "retry:\n  base_delay: 1s\n  max_delay: 30s\n  budget: 1s\n",
			""}, // accepted: a retry may start after 500ms
		{"base_delay set over twice the budget", "retry:\n  base_delay: 25s\n  max_delay: 30s\n",
			"t.yaml:2:15: retry.base_delay: retry.budget (10s) is under half of retry.base_delay (25s)"},
		{"stream_window alone", "limits:\n  connection_window: 0\n",
			"t.yaml:2:22: limits.connection_window: limits.stream_window (1048576 bytes) and limits.connection_window (0 bytes) must both be 0"},
		{"both windows", "limits:\n  stream_window: 0\n  connection_window: 1MiB\n",
			"t.yaml:2:18: limits.stream_window: limits.stream_window (0 bytes) and limits.connection_window (1048576 bytes) must both be 0 (sized by gRPC) or both be set (limits.connection_window: t.yaml:3:22)"},
		{"stream_window over connection_window", "limits:\n  stream_window: 8MiB\n",
			"t.yaml:2:18: limits.stream_window: limits.connection_window (4194304 bytes) must be at least limits.stream_window (8388608 bytes)"},
		{"connection_window under stream_window", "limits:\n  connection_window: 512KiB\n",
			"t.yaml:2:22: limits.connection_window: limits.connection_window (524288 bytes) must be at least limits.stream_window (1048576 bytes)"},
		{"listen on admin_listen's port", "listen: 127.0.0.1:9151\n",
			"t.yaml:1:9: listen: admin_listen (127.0.0.1:9151) is listen's port (127.0.0.1:9151)"},
		{"admin_listen on listen's port", "admin_listen: 127.0.0.1:50151\n",
			"t.yaml:1:15: admin_listen: admin_listen (127.0.0.1:50151) is listen's port (127.0.0.1:50151)"},
		{"providers per identity over max_providers", "limits:\n  max_providers_per_identity: 2000\n",
			"t.yaml:2:31: limits.max_providers_per_identity: limits.max_providers_per_identity (2000) is over limits.max_providers (1000)"},
		{"both provider limits", "limits:\n  max_providers: 10\n  max_providers_per_identity: 11\n",
			"t.yaml:3:31: limits.max_providers_per_identity: limits.max_providers_per_identity (11) is over limits.max_providers (10): one identity could never reach it (limits.max_providers: t.yaml:2:18)"},
		{"providers per identity at max_providers", "limits: {max_providers: 10, max_providers_per_identity: 10}\n", ""},
		{"hooks per identity over max_scoped_hooks", "limits:\n  max_hooks_per_identity: 101\n",
			"t.yaml:2:27: limits.max_hooks_per_identity: limits.max_hooks_per_identity (101) is over limits.max_scoped_hooks (100)"},
		{"hooks per identity over max_hooks alone", "limits: {max_hooks: 1, max_hooks_per_identity: 100}\n", ""}, // the operator's cap is apart
		{"durable store set", "data_dir: ./d\nsession: {store: memory}\n", ""},
		{"data_dir emptied", "data_dir: \"\"\n",
			`t.yaml:1:11: data_dir: data_dir ("") must not be empty with a durable session.store ("bolt")`},
		{"durable store without data_dir", "data_dir: \"\"\nsession:\n  store: journal\n",
			`t.yaml:1:11: data_dir: data_dir ("") must not be empty with a durable session.store ("journal"); for the working directory write "." (session.store: t.yaml:3:10)`},
	})
}

// TestUnsetCapFollowsALoweredTotal: a total lowered under its per-identity cap's default
// loads, with the cap lowered to it; a cap the file or an override sets over it does not.
func TestUnsetCapFollowsALoweredTotal(t *testing.T) {
	cfg, err := config.Parse([]byte("limits: {max_providers: 10, max_scoped_hooks: 1}\n"), "t.yaml")
	if err != nil {
		t.Fatalf("Parse(lowered totals) = %v, want it accepted", err)
	}
	if got := cfg.Limits.MaxProvidersPerIdentity; got != 10 {
		t.Errorf("max_providers_per_identity = %d, want 10 (max_providers)", got)
	}
	if got := cfg.Limits.MaxHooksPerIdentity; got != 1 {
		t.Errorf("max_hooks_per_identity = %d, want 1 (max_scoped_hooks)", got)
	}
	path := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(path, []byte("limits: {max_providers: 10}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	over := config.Override{Key: "limits.max_providers_per_identity", Source: "command line",
		Set: func(c *config.Config) { c.Limits.MaxProvidersPerIdentity = 50 }}
	_, err = config.Load(path, over)
	if want := "command line: limits.max_providers_per_identity: limits.max_providers_per_identity (50) is over limits.max_providers (10)"; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(cap set by an override over the total) = %v, want ErrInvalid mentioning %q", err, want)
	}
}

// TestMaxHealthWatches: the open health watches are capped by default; the cap may not
// be 0 (every health Watch refused).
func TestMaxHealthWatches(t *testing.T) {
	if def := accepted(t, ""); def != nil && def.Limits.MaxHealthWatches != 10000 {
		t.Errorf("max_health_watches = %d, want 10000 by default", def.Limits.MaxHealthWatches)
	}
	refusedAll(t, map[string]string{
		"limits: {max_health_watches: 0}\n":  "limits.max_health_watches: must be positive",
		"limits: {max_health_watches: -1}\n": "limits.max_health_watches: must be positive",
	})
	if cfg := accepted(t, "limits: {max_health_watches: 5}\n"); cfg != nil && cfg.Limits.MaxHealthWatches != 5 {
		t.Errorf("max_health_watches = %d, want 5 as set", cfg.Limits.MaxHealthWatches)
	}
}

// TestMaxConnections: the open gRPC connections are capped by default; the cap may not
// be 0 (every connection refused).
func TestMaxConnections(t *testing.T) {
	if def := accepted(t, ""); def != nil && def.Limits.MaxConnections != 10000 {
		t.Errorf("max_connections = %d, want 10000 by default", def.Limits.MaxConnections)
	}
	refusedAll(t, map[string]string{
		"limits: {max_connections: 0}\n":  "limits.max_connections: must be positive",
		"limits: {max_connections: -1}\n": "limits.max_connections: must be positive",
	})
	if cfg := accepted(t, "limits: {max_connections: 2}\n"); cfg != nil && cfg.Limits.MaxConnections != 2 {
		t.Errorf("max_connections = %d, want 2 as set", cfg.Limits.MaxConnections)
	}
}

// TestStreamLimits: the batches in flight and the open watches are capped by default,
// overall and per confined identity; neither cap may be 0 (every stream refused), and
// one identity's is at most the total, which it follows when only the total is lowered
// under it.
func TestStreamLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		total, perID       string // the keys under limits
		defTotal, defPerID int
		get                func(*config.Limits) (total, perID int)
	}{
		"batches": {"max_batches", "max_batches_per_identity", 10000, 1000,
			func(l *config.Limits) (int, int) { return l.MaxBatches, l.MaxBatchesPerIdentity }},
		"watches": {"max_watches", "max_watches_per_identity", 10000, 100,
			func(l *config.Limits) (int, int) { return l.MaxWatches, l.MaxWatchesPerIdentity }},
	} {
		t.Run(name, func(t *testing.T) {
			if def := accepted(t, ""); def != nil {
				if total, perID := tc.get(&def.Limits); total != tc.defTotal || perID != tc.defPerID {
					t.Errorf("%s / %s = %d / %d, want %d / %d by default", tc.total, tc.perID, total, perID, tc.defTotal, tc.defPerID)
				}
			}
			over := fmt.Sprintf("limits.%s (%%d) is over limits.%s (%%d): one identity could never reach it", tc.perID, tc.total)
			refusedAll(t, map[string]string{
				fmt.Sprintf("limits: {%s: 0}\n", tc.total):                       "limits." + tc.total + ": must be positive",
				fmt.Sprintf("limits: {%s: 0}\n", tc.perID):                       "limits." + tc.perID + ": must be positive",
				fmt.Sprintf("limits: {%s: -1}\n", tc.total):                      "limits." + tc.total + ": must be positive",
				fmt.Sprintf("limits:\n  %s: %d\n", tc.perID, tc.defTotal+1):      "t.yaml:2:29: limits." + tc.perID + ": " + fmt.Sprintf(over, tc.defTotal+1, tc.defTotal),
				fmt.Sprintf("limits:\n  %s: 10\n  %s: 11\n", tc.total, tc.perID): "t.yaml:3:29: limits." + tc.perID + ": " + fmt.Sprintf(over, 11, 10) + " (limits." + tc.total + ": t.yaml:2:16)",
			})
			accepted(t, fmt.Sprintf("limits: {%s: 10, %s: 10}\n", tc.total, tc.perID))
			if cfg := accepted(t, fmt.Sprintf("limits: {%s: 64}\n", tc.total)); cfg != nil {
				if _, perID := tc.get(&cfg.Limits); perID != 64 {
					t.Errorf("%s = %d under %s 64 alone, want 64 (%s)", tc.perID, perID, tc.total, tc.total)
				}
			}
		})
	}
}

// TestToolSetsPerIdentityWithinTheRegistry: one identity's live tool sets cannot be
// capped above the registry's, which a cap could never reach.
func TestToolSetsPerIdentityWithinTheRegistry(t *testing.T) {
	refused(t, "limits:\n  max_tool_sets_per_identity: 100001\n", "t.yaml:2:31: limits.max_tool_sets_per_identity: 100001, over the most, 100000 (the registry's live tool sets)")
	accepted(t, "limits: {max_tool_sets_per_identity: 100000}\n")
}

// TestClashWithAnOverride: a clash between a file's value and an override's names the
// override's source for the key it set.
func TestClashWithAnOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(path, []byte("data_dir: \"\"\nsession:\n  store: memory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	journal := config.Override{Key: "session.store", Source: "command line", Set: func(c *config.Config) { c.Session.Store = "journal" }}
	_, err := config.Load(path, journal)
	if want := path + `:1:11: data_dir: data_dir ("") must not be empty with a durable session.store ("journal"); for the working directory write "." (session.store: command line)`; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(data_dir \"\", -session-store journal) = %v, want %q", err, want)
	}
	if err := os.WriteFile(path, []byte("admin_listen: 127.0.0.1:7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := config.Override{Key: "listen", Source: "command line", Set: func(c *config.Config) { c.Listen = "127.0.0.1:7000" }}
	_, err = config.Load(path, listen)
	if want := path + ":1:15: admin_listen: admin_listen (127.0.0.1:7000) is listen's port (127.0.0.1:7000): the admin HTTP listener needs one of its own (listen: command line)"; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(admin_listen 7000, -listen 7000) = %v, want %q", err, want)
	}
}

// TestPlace: the place of a value the file sets, a sequence's items included, for the
// errors of packages that check the config's values; none for a default's.
func TestPlace(t *testing.T) {
	cfg, err := config.Parse([]byte("auth:\n  tls: {cert_file: s.pem, key_file: k.pem, client_ca_file: ca.pem}\n  grants:\n    - {identity: a, role: operator}\n    - identity: b\n      role: operator\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"auth.grants[0]":          "t.yaml:4:7",
		"auth.grants[1]":          "t.yaml:5:7",
		"auth.grants[1].identity": "t.yaml:5:17",
		"auth.tls.client_ca_file": "t.yaml:2:60",
		"listen":                  "",
		"auth.grants[2]":          "",
	} {
		if got := cfg.Place(path); got != want {
			t.Errorf("Place(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestAuthSectionClashes: the auth section's settings that need one another are
// refused at the place of the key the file sets, naming both keys and their values,
// rather than by the auth package without a place (auth.New keeps the same rules for
// configurations not read from a file).
func TestAuthSectionClashes(t *testing.T) {
	const grant = "  grants:\n    - {identity: op, role: operator}\n"
	checkCases(t, []struct{ name, in, want string }{
		{"cert without key", "auth:\n  tls:\n    cert_file: s.pem\n" + grant,
			`t.yaml:3:16: auth.tls.cert_file: auth.tls.cert_file ("s.pem") and auth.tls.key_file ("") must both be set`},
		{"key without cert", "auth:\n  tls:\n    key_file: k.pem\n" + grant,
			`t.yaml:3:15: auth.tls.key_file: auth.tls.cert_file ("") and auth.tls.key_file ("k.pem") must both be set`},
		{"client CA without cert", "auth:\n  tls: {client_ca_file: ca.pem}\n" + grant,
			`t.yaml:2:25: auth.tls.client_ca_file: auth.tls.client_ca_file ("ca.pem") needs auth.tls.cert_file and auth.tls.key_file`},
		{"grants without a method", "auth:\n" + grant,
			"t.yaml:3:5: auth.grants: 1 grant needs an authentication method: auth.tls.client_ca_file, auth.token_file or auth.jwks_file (all unset)"},
		{"token file without grants", "auth:\n  token_file: tokens.txt\n",
			`t.yaml:2:15: auth.token_file: auth.token_file ("tokens.txt") turns authentication on, but auth.grants is empty: every call would be refused`},
		{"issuer without jwks", "auth:\n  token_file: tokens.txt\n  jwt: {issuer: me}\n" + grant,
			`t.yaml:3:17: auth.jwt.issuer: auth.jwt.issuer ("me") needs auth.jwks_file ("")`},
		{"audience without jwks", "auth:\n  token_file: tokens.txt\n  jwt:\n    audience: toolsd\n" + grant,
			`t.yaml:4:15: auth.jwt.audience: auth.jwt.audience ("toolsd") needs auth.jwks_file ("")`},
		{"whole", "auth:\n  tls: {cert_file: s.pem, key_file: k.pem, client_ca_file: ca.pem}\n  token_file: t.txt\n  jwks_file: j.json\n  jwt: {issuer: me, audience: toolsd}\n" + grant, ""},
		{"tls alone", "auth:\n  tls: {cert_file: s.pem, key_file: k.pem}\n", ""},
	})
}

// refused checks that Parse refuses in as invalid, with a message that contains want.
func refused(t *testing.T, in, want string) {
	t.Helper()
	_, err := config.Parse([]byte(in), "t.yaml")
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse(%q) = %v, want ErrInvalid mentioning %q", in, err, want)
	}
}

// refusedAll checks refused for every input and wanted message of cases.
func refusedAll(t *testing.T, cases map[string]string) {
	t.Helper()
	for in, want := range cases {
		refused(t, in, want)
	}
}

// accepted checks that Parse accepts in, and returns the config (nil if refused).
func accepted(t *testing.T, in string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(in), "t.yaml")
	if err != nil {
		t.Errorf("Parse(%q) = %v, want it accepted", in, err)
	}
	return cfg
}

// checkCases runs named cases: an empty want is an input Parse accepts, any other one
// that it refuses with a message containing want.
func checkCases(t *testing.T, cases []struct{ name, in, want string }) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == "" {
				accepted(t, c.in)
				return
			}
			refused(t, c.in, c.want)
		})
	}
}

// TestArgumentBytesWithinTheRequest: a call's arguments arrive in its batch's
// ExecuteBatch message, which max_request_bytes bounds, so a max_argument_bytes over it
// could never be reached: a file that sets it so is refused naming both keys, and one
// that lowers max_request_bytes alone under the argument limit's default lowers that
// with it, as an unset per-identity cap follows its total.
func TestArgumentBytesWithinTheRequest(t *testing.T) {
	checkCases(t, []struct{ name, in, want string }{
		{"argument over the default request", "limits:\n  max_argument_bytes: 8MiB\n",
			"t.yaml:2:23: limits.max_argument_bytes: limits.max_argument_bytes (8388608 bytes) is over limits.max_request_bytes (4194304 bytes): a call's arguments arrive in its batch's request, so none could be that large"},
		{"both set", "limits:\n  max_request_bytes: 1MiB\n  max_argument_bytes: 2MiB\n",
			"t.yaml:3:23: limits.max_argument_bytes: limits.max_argument_bytes (2097152 bytes) is over limits.max_request_bytes (1048576 bytes): a call's arguments arrive in its batch's request, so none could be that large (limits.max_request_bytes: t.yaml:2:22)"},
		{"argument at the request", "limits: {max_request_bytes: 15MiB, max_argument_bytes: 15MiB}\n", ""},
	})
	cfg := accepted(t, "limits: {max_request_bytes: 64KiB}\n")
	if cfg != nil && cfg.Limits.MaxArgumentBytes != 64<<10 {
		t.Errorf("max_argument_bytes = %d under max_request_bytes 64KiB alone, want 65536 (max_request_bytes)", cfg.Limits.MaxArgumentBytes)
	}
	if cfg := accepted(t, "limits: {max_request_bytes: 8MiB}\n"); cfg != nil && cfg.Limits.MaxArgumentBytes != 1<<20 {
		t.Errorf("max_argument_bytes = %d under max_request_bytes 8MiB, want its default 1MiB", cfg.Limits.MaxArgumentBytes)
	}
}

// TestRetentionIntervalUnderASecond: each retention sweep is a write transaction of the
// session log (with durability sync, a commit and its fsync) that reads every session's
// age, queued with the appends; a sweep starts again as soon as the last one ends when
// the interval is shorter than a sweep, so an interval of 1ns or 5ms kept the log's
// writer sweeping (a fifth of a core and a commit every few ms on an empty bbolt log).
// It is refused under 1s.
func TestRetentionIntervalUnderASecond(t *testing.T) {
	refusedAll(t, map[string]string{
		"session:\n  retention: {interval: 1ns}\n":   "t.yaml:2:25: session.retention.interval: 1ns is under 1s",
		"session:\n  retention: {interval: 999ms}\n": "t.yaml:2:25: session.retention.interval: 999ms is under 1s",
	})
	accepted(t, "session: {retention: {interval: 1s}}\n")
}

// TestTransportLimitsThatCannotWork: values the transport takes but that fail every
// request or drop live connections are refused, saying why: a header list under 1KiB
// (gRPC's own headers of a request, as HTTP/2 counts them, take about 500 bytes before
// any credential, so a client refuses to send any: max_header_bytes: 1 failed every
// RPC), a keepalive_timeout under 100ms (gRPC drops a connection whose ping is not
// answered within it: at 100µs it dropped every idle connection on loopback, live ones
// with an open watch included) and a connection_timeout under 100ms (at 1µs every
// connection was closed in its handshake).
func TestTransportLimitsThatCannotWork(t *testing.T) {
	refusedAll(t, map[string]string{
		"limits:\n  max_header_bytes: 1\n":      "t.yaml:2:21: limits.max_header_bytes: 1 bytes, under the least, 1024 (1KiB): gRPC's own headers of a request take about 500 bytes",
		"limits:\n  max_header_bytes: 1023\n":   "t.yaml:2:21: limits.max_header_bytes: 1023 bytes, under the least, 1024",
		"limits:\n  keepalive_timeout: 1ns\n":   "t.yaml:2:22: limits.keepalive_timeout: 1ns is under 100ms: a ping's answer takes a round trip, and a connection whose answer comes later is dropped",
		"limits:\n  keepalive_timeout: 99ms\n":  "t.yaml:2:22: limits.keepalive_timeout: 99ms is under 100ms",
		"limits:\n  connection_timeout: 1us\n":  "t.yaml:2:23: limits.connection_timeout: 1µs is under 100ms: a connection's handshake takes round trips, and one that has not finished is closed",
		"limits:\n  connection_timeout: 99ms\n": "t.yaml:2:23: limits.connection_timeout: 99ms is under 100ms",
	})
	accepted(t, "limits: {max_header_bytes: 1KiB, keepalive_timeout: 100ms, connection_timeout: 100ms}\n")
}

// TestConfigFileWithNoSettings: a config file that holds no YAML document (empty, only
// comments, a lone "---") is refused naming it, at a start and so at a reload: it loaded
// as the defaults, so a file emptied by an interrupted write or a mount not yet filled
// ran, or on SIGHUP swapped the running policy for the default's (allow, no rules and
// no guards), without a word. Running with the defaults is toolsd without -config.
func TestConfigFileWithNoSettings(t *testing.T) {
	for name, text := range map[string]string{"empty": "", "comments": "# policy to come\n\n", "document start": "---\n", "blank": "  \n"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "toolsd.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path)
			if want := path + ": holds no settings (run toolsd without -config for the defaults)"; !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Errorf("Load(%q) = %v, want ErrInvalid mentioning %q", text, err, want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(path, []byte("# only the policy\npolicy: {default: deny}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Errorf("Load(a file setting one key) = %v, want it accepted", err)
	}
}
