package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// msgs lists the findings as "line: message".
func msgs(fs []finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = strconv.Itoa(f.line) + ": " + f.msg
	}
	return out
}

// wantFindings fails unless fs holds exactly one finding per entry of want, each on the
// given line and containing the given text.
func wantFindings(t *testing.T, fs []finding, want map[int]string) {
	t.Helper()
	if len(fs) != len(want) {
		t.Fatalf("findings = %q, want %d", msgs(fs), len(want))
	}
	for _, f := range fs {
		if w, ok := want[f.line]; !ok || !strings.Contains(f.msg, w) {
			t.Errorf("finding %d: %q, want one containing %q", f.line, f.msg, w)
		}
	}
}

func TestCodeSpans(t *testing.T) {
	text := "a `-listen` b\n```sh\ngrpcurl `-notes`\n```\nc `go install\nx@v1` d `e`\n"
	got := codeSpans(text)
	want := []span{{1, "-listen"}, {5, "go install x@v1"}, {6, "e"}}
	if !slices.Equal(got, want) {
		t.Errorf("codeSpans = %v, want %v (fenced blocks skipped, wrapped spans joined)", got, want)
	}
}

func TestCheckFlags(t *testing.T) {
	toolsd := map[string]bool{"listen": true, "config": true, "ephemeral": true}
	agent := map[string]bool{"addr": true, "approve": true}
	text := "`-listen` `--ephemeral` `toolsd -config FILE` `--addr` `-approve=false`\n" +
		"`-listn`\n" +
		"`toolsd -addr x`\n" +
		"`go run ./examples/agent -session s` `-1` ` `\n"
	wantFindings(t, checkFlags(codeSpans(text), toolsd, agent), map[int]string{
		2: `"-listn": neither toolsd nor an example program has it`,
		3: `toolsd has no flag "-addr"`,
	})
	wantFindings(t, checkFlags(codeSpans("`-listen` `toolsd -config F`\n"), toolsd, agent), map[int]string{
		0: "toolsd's flag -ephemeral is not documented",
	})
}

func TestCheckKeys(t *testing.T) {
	keys, err := configKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"limits.max_result_bytes", "session.retention.max_age", "auth.tls.cert_file", "policy.default"} {
		if !keys[k] {
			t.Errorf("configKeys() lacks %s", k)
		}
	}
	text := "`limits.max_result_bytes` `registry.pinning: refuse` `session.called(\"x\")` `model.provider`\n" +
		"`limits.max_results`\n" +
		"`session.retention.max_ages: 1h`\n"
	wantFindings(t, checkKeys(codeSpans(text), keys), map[int]string{
		2: `config key "limits.max_results" does not exist`,
		3: `config key "session.retention.max_ages" does not exist`,
	})
}

func TestCheckLimitsTable(t *testing.T) {
	defaults := defaultPaths(t)
	text := "| key | default | crossing it |\n|---|---|---|\n" +
		"| `limits.max_json_depth` | 64 (at most 10000) | x |\n" +
		"| `limits.stream_window` / `connection_window` | 1048576 / 4MiB | x |\n" +
		"| `limits.outbox_size` / `write_timeout` | 256 (at most 65536) / 10000ms | x |\n" +
		"| `timeouts.shutdown` | 20s | x |\n" +
		"| `limits.max_hooks` / `max_scoped_hooks` | 100 | x |\n" +
		"| `limits.max_hookz` | 100 | x |\n" +
		"| `limit.max_hooks` | 100 | x |\n" +
		"| max_hooks | 100 | x |\n" +
		"\n| `limits.max_hookz` | 100 | x |\n" // another table
	wantFindings(t, checkLimitsTable(limitsRows(text), defaults), map[int]string{
		6:  "timeouts.shutdown: the README says its default is 20s, defaults.yaml 30s",
		7:  "2 keys but 1 defaults",
		8:  "limits.max_hookz has no embedded default",
		9:  "limit.max_hooks has no embedded default",
		10: "max_hooks has no embedded default",
	})
	wantFindings(t, checkLimitsTable(limitsRows("no table\n"), defaults), map[int]string{0: "no Limits table rows"})
}

func TestCheckLimitsCovered(t *testing.T) {
	defaults := map[string]*yaml.Node{
		"limits":                   {Kind: yaml.MappingNode},
		"limits.max_json_depth":    {Kind: yaml.ScalarNode, Value: "64"},
		"limits.stream_window":     {Kind: yaml.ScalarNode, Value: "1MiB"},
		"limits.connection_window": {Kind: yaml.ScalarNode, Value: "4MiB"},
		"limits.max_hooks":         {Kind: yaml.ScalarNode, Value: "100"},
		"timeouts.shutdown":        {Kind: yaml.ScalarNode, Value: "30s"},
	}
	text := "| key | default | crossing it |\n|---|---|---|\n" +
		"| `limits.max_json_depth` | 64 | x |\n" +
		"| `limits.stream_window` / `connection_window` | 1MiB / 4MiB | x |\n" +
		"\n| `limits.max_hooks` | 100 | x |\n" // another table
	wantFindings(t, checkLimitsCovered(limitsRows(text), defaults), map[int]string{
		0: "limits.max_hooks has no row in the Limits table",
	})
}

// TestREADMELimitsTable: the README's Limits table has a row for every limit, and
// every row names limits that exist, with their defaults.
func TestREADMELimitsTable(t *testing.T) {
	raw := repoFile(t, "README.md")
	defaults := defaultPaths(t)
	rows := limitsRows(raw)
	if fs := append(checkLimitsTable(rows, defaults), checkLimitsCovered(rows, defaults)...); len(fs) > 0 {
		t.Errorf("checkLimitsTable, checkLimitsCovered(README.md) = %q, want none", msgs(fs))
	}
}

func TestCheckYAMLBlocks(t *testing.T) {
	text := "x\n```yaml\nlimits:\n  max_calls_per_batch: 8\n```\n" +
		"```yaml\npolicy:\n  rules:\n    - tool: echo\n      decision: maybe\n```\n" +
		"```yaml\nscheduler:\n  max_threads: 4\n```\n"
	wantFindings(t, checkYAMLBlocks("README.md", text), map[int]string{
		7:  "README.md:10:17: policy.rules[0].decision: unknown decision",
		13: "README.md:14:3: scheduler.max_threads: unknown key",
	})
}

func TestToolsdMetrics(t *testing.T) {
	metrics, err := toolsdMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for name, labels := range map[string][]string{
		"toolsd_pipeline_calls_total":   {"code", "tool"},
		"toolsd_pipeline_retries_total": {"code", "tool"}, // a vector with no series yet
		"toolsd_registry_tools":         nil,
	} {
		if got, ok := metrics[name]; !ok || !slices.Equal(got, labels) {
			t.Errorf("toolsdMetrics()[%s] = %v, %v; want %v", name, got, ok, labels)
		}
	}
}

func TestCheckMetrics(t *testing.T) {
	metrics := map[string][]string{
		"toolsd_calls_total":      {"code", "tool"},
		"toolsd_hook_failures":    {"hook", "outcome"},
		"toolsd_session_seconds":  nil,
		"toolsd_broker_connected": nil,
	}
	text := "`toolsd_calls_total{tool,code}` `toolsd_hook_failures{outcome=\"fail_open\"}` `toolsd_session_seconds_bucket`\n" +
		"`toolsd_calls_total{tool}`\n" +
		"`toolsd_hook_failures{stage=\"x\"}`\n" +
		"`toolsd_call_total`\n"
	wantFindings(t, checkMetrics(text, metrics), map[int]string{
		2: "lists the labels [tool], toolsd has [code tool]",
		3: `toolsd_hook_failures has no label "stage"`,
		4: "toolsd_call_total: toolsd has no such metric",
		0: "metric toolsd_broker_connected is not documented",
	})
	scrape := "# HELP toolsd_session_seconds x\n# TYPE toolsd_session_seconds histogram\n"
	wantFindings(t, checkScrape(scrape, metrics), map[int]string{
		0: "metric toolsd_broker_connected is not in toolsd's /metrics",
	})
}

func TestNodeFlags(t *testing.T) {
	flags, err := nodeFlagsOf(filepath.Join("..", "..", "examples", "node"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"addr", "scope", "retake-window-ms", "session", "deny"} {
		if !flags[want] {
			t.Errorf("the Node examples' options %v lack %q", flags, want)
		}
	}
}

func TestCheckTableIndent(t *testing.T) {
	text := "- **Metrics** — served:\n\n" +
		"  | series | what |\n" +
		"  |---|---|\n" +
		"  | `a` | b |\n" +
		"| `c` | d |\n" +
		"  | `e` | f |\n\n" +
		"| top | level |\n|---|---|\n"
	wantFindings(t, checkTableIndent(text), map[int]string{
		6: "indented 0 spaces, its table 2",
		7: "indented 2 spaces, its table 0",
	})
}

// TestREADMETablesHoldTogether: a row indented unlike the rows above it ends its table
// (in a list item, GitHub then shows the rest of the table as one paragraph of pipes).
func TestREADMETablesHoldTogether(t *testing.T) {
	raw := repoFile(t, "README.md")
	if fs := checkTableIndent(raw); len(fs) > 0 {
		t.Errorf("checkTableIndent(README.md) = %q, want none", msgs(fs))
	}
}

func TestCheckLimitsBounds(t *testing.T) {
	defaults := defaultPaths(t)
	text := "| key | default | crossing it |\n|---|---|---|\n" +
		"| `limits.max_json_depth` | 64 (at most 10000) | x |\n" +
		"| `limits.outbox_size` / `write_timeout` | 256 (at most 65535) / 10s | x |\n" +
		"| `limits.keepalive_time` / `keepalive_timeout` | 10s (at least 2s) / 5s | x |\n" +
		"| `limits.max_hook_contexts` / `max_hook_context_bytes` | 16 / 64KiB (at most 8MiB) | x |\n" +
		"| `limits.max_hooks_per_identity` | 10 (at most `max_scoped_hooks`) | x |\n" +
		"| `limits.max_in_flight_per_provider` | 1024 (at most 100000) | x |\n"
	wantFindings(t, checkLimitsBounds(limitsRows(text), defaults), map[int]string{
		4: "limits.outbox_size: the README says at most 65535, but config takes 65536",
		5: "limits.keepalive_time: the README says at least 2s, but config takes 1.999999999s",
		8: "limits.max_in_flight_per_provider: the README says at most 100000, but config takes 100001",
	})
}

// TestREADMELimitsBounds: the bounds the README's Limits table notes are config's.
func TestREADMELimitsBounds(t *testing.T) {
	raw := repoFile(t, "README.md")
	defaults := defaultPaths(t)
	if fs := checkLimitsBounds(limitsRows(raw), defaults); len(fs) > 0 {
		t.Errorf("checkLimitsBounds(README.md) = %q, want none", msgs(fs))
	}
}

// repoFile is the text of the repository's file at path (relative to its root).
func repoFile(t *testing.T, path ...string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// defaultPaths is config's defaults by dotted key.
func defaultPaths(t *testing.T) map[string]*yaml.Node {
	t.Helper()
	defaults, err := config.DefaultPaths()
	if err != nil {
		t.Fatal(err)
	}
	return defaults
}

// A deadline reads the same whichever side's timer fired first; other errors and
// messages are compared as they are.
func TestNormalizeDeadlineMessage(t *testing.T) {
	client := "{}\nERROR:\n  Code: DeadlineExceeded\n  Message: context deadline exceeded\ngrpcurl exited with status 68"
	server := "{}\nERROR:\n  Code: DeadlineExceeded\n  Message: stream terminated by RST_STREAM with error code: CANCEL\ngrpcurl exited with status 68"
	if normalize(client) != normalize(server) {
		t.Errorf("normalize(%q) != normalize(%q)", client, server)
	}
	other := "{}\nERROR:\n  Code: Unavailable\n  Message: stream terminated by RST_STREAM with error code: CANCEL"
	if normalize(other) == normalize(strings.Replace(other, "CANCEL", "INTERNAL_ERROR", 1)) {
		t.Errorf("normalize hides the message of a %q error", "Unavailable")
	}
}
