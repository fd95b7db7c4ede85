package app_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

const (
	readmeFile    = "../../README.md"
	alertsFile    = "../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../deploy/grafana/toolsd-dashboard.json"
)

var (
	// sampleLine is one sample of the text exposition format: its name and labels.
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
	// seriesRef is a toolsd or gRPC series named in a query, with its selector.
	seriesRef = regexp.MustCompile(`\b((?:toolsd|grpc_server)_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	grouping  = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	// labelValues is a dashboard variable's label_values(series, label).
	labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	// documented is a series the README names, with the labels it lists for it:
	// `toolsd_x_total{a,b}`.
	documented = regexp.MustCompile("`(toolsd_[a-z0-9_]+)(?:\\{([a-z_,]*)\\})?`")
)

// liveSeries scrapes a running toolsd that has served a provider's call and returns
// every series name on /metrics with the label names its samples carry.
func liveSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	e := start(t, "")
	runProvider(t, e.app.Addr(), echoTool())
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-live", Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"hi"}`)}}, batchOptions{})
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	out := map[string]map[string]bool{}
	for line := range strings.SplitSeq(body, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := out[m[1]]
		if labels == nil {
			labels = map[string]bool{}
			out[m[1]] = labels
		}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[lp[1]] = true
		}
	}
	if len(out["toolsd_pipeline_calls_total"]) == 0 || len(out["grpc_server_handled_total"]) == 0 {
		t.Fatalf("/metrics holds %d series names, want toolsd's and grpc_server_*:\n%s", len(out), body)
	}
	return out
}

// checkLiveQuery fails when q names a series the live scrape lacks, matches on a label
// that series lacks, or groups by a label none of its series has. Prometheus adds
// instance and job to every series at scrape time.
func checkLiveQuery(t *testing.T, where, q string, live map[string]map[string]bool) {
	t.Helper()
	refs := seriesRef.FindAllStringSubmatch(q, -1)
	if len(refs) == 0 {
		t.Errorf("%s: names no toolsd or gRPC series: %s", where, q)
	}
	have := map[string]bool{"instance": true, "job": true}
	for _, r := range refs {
		labels, ok := live[r[1]]
		if !ok {
			t.Errorf("%s: %s is not on a live /metrics", where, r[1])
			continue
		}
		for l := range labels {
			have[l] = true
		}
		for _, m := range matcher.FindAllStringSubmatch(r[2], -1) {
			if !labels[m[1]] {
				t.Errorf("%s: %s on a live /metrics has no label %q", where, r[1], m[1])
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(q, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !have[l] {
				t.Errorf("%s: groups by %q, which none of its series has on a live /metrics", where, l)
			}
		}
	}
}

// TestShippedQueriesMatchALiveScrape checks the alert rules and the dashboard against
// what a running toolsd exports, after a provider registered and served a call: every
// series they name exists there with the labels they match on and group by, and every
// toolsd series there is shown by some dashboard panel (internal/observe's test knows
// only that package's metrics).
// (internal/observe's deploy tests check the queries' shape against the metrics package
// alone; this catches what the assembly exports differently.)
func TestShippedQueriesMatchALiveScrape(t *testing.T) {
	live := liveSeries(t)

	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("decoding %s: %v", alertsFile, err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			checkLiveQuery(t, "alert "+r.Alert, r.Expr, live)
		}
	}
	if alerts == 0 {
		t.Errorf("%s has no alert rules", alertsFile)
	}

	raw, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decoding %s: %v", dashboardFile, err)
	}
	queries := 0
	shown := map[string]bool{}
	var walk func(ps []json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("decoding a panel of %s: %v", dashboardFile, err)
			}
			for _, tg := range p.Targets {
				queries++
				checkLiveQuery(t, "panel "+p.Title, tg.Expr, live)
				for _, r := range seriesRef.FindAllStringSubmatch(tg.Expr, -1) {
					shown[seriesBase(r[1], live)] = true
				}
			}
			walk(p.Panels) // a collapsed row's
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Errorf("%s has no panel queries", dashboardFile)
	}
	for name := range live {
		if base := seriesBase(name, live); strings.HasPrefix(base, "toolsd_") && !shown[base] {
			t.Errorf("%s is on a live /metrics but no panel of %s shows it", base, dashboardFile)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: definition %q is not label_values(series, label)", v.Name, v.Definition)
			continue
		}
		if !live[m[1]][m[2]] {
			t.Errorf("variable %s: %s on a live /metrics has no label %q", v.Name, m[1], m[2])
		}
	}
}

// TestDocumentedSeriesMatchALiveScrape: every toolsd series the README names is on a
// live /metrics, with exactly the labels the README lists for it (histograms' le aside).
func TestDocumentedSeriesMatchALiveScrape(t *testing.T) {
	live := liveSeries(t)
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range documented.FindAllStringSubmatch(string(raw), -1) {
		name, listed := m[1], m[2]
		named[name] = true
		labels, ok := live[name]
		if !ok {
			labels, ok = live[name+"_bucket"] // a histogram, named without its suffix
		}
		if !ok {
			t.Errorf("README names %s, which is not on a live /metrics", name)
			continue
		}
		if !strings.Contains(m[0], "{") {
			continue
		}
		want := map[string]bool{}
		for l := range strings.SplitSeq(listed, ",") {
			if l != "" {
				want[l] = true
			}
		}
		for l := range labels {
			if l != "le" && !want[l] {
				t.Errorf("README lists %s's labels as {%s}; a live /metrics also has %q", name, listed, l)
			}
		}
		for l := range want {
			if !labels[l] {
				t.Errorf("README lists %s's labels as {%s}; a live /metrics has no %q", name, listed, l)
			}
		}
	}
	// And the README names every toolsd series.
	for name := range live {
		if base := seriesBase(name, live); strings.HasPrefix(base, "toolsd_") && !named[base] {
			t.Errorf("%s is on a live /metrics but not in the README", base)
		}
	}
}

// seriesBase is the metric a series of a live scrape belongs to: a histogram's
// _bucket, _sum and _count series are its name's.
func seriesBase(name string, live map[string]map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && live[b+"_bucket"] != nil {
			return b
		}
	}
	return name
}
