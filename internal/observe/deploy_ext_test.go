package observe_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"
)

const (
	alertsFile    = "../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../deploy/grafana/toolsd-dashboard.json"
)

// exported maps every series name a scrape of toolsd shows (histograms as _bucket,
// _sum and _count) to its label names: this package's metrics and the gRPC server's,
// registered the way internal/server registers them.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m, reg := newMetrics(t)
	exerciseAll(t, m)
	sm := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(sm)
	noop := func(context.Context, any) (any, error) { return nil, nil }
	_, _ = sm.UnaryServerInterceptor()(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/toolsd.v1.ToolService/ListTools"}, noop)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	out := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels := map[string]bool{"instance": true, "job": true}
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels[lp.GetName()] = true
		}
		names := []string{mf.GetName()}
		if mf.GetMetric()[0].GetHistogram() != nil {
			labels["le"] = true
			names = []string{mf.GetName() + "_bucket", mf.GetName() + "_sum", mf.GetName() + "_count"}
		}
		for _, n := range names {
			out[n] = labels
		}
	}
	if len(out) == 0 || out["grpc_server_handled_total"] == nil {
		t.Fatalf("exported series = %v, want toolsd's and grpc_server_*", out)
	}
	return out
}

var (
	seriesRef = regexp.MustCompile(`\b((?:toolsd|grpc_server)_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping  = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkQuery fails when q names no toolsd or gRPC series, a series toolsd does not
// export, or a label such a series does not have.
func checkQuery(t *testing.T, where, q string, series map[string]map[string]bool) {
	t.Helper()
	refs := seriesRef.FindAllStringSubmatch(q, -1)
	if len(refs) == 0 {
		t.Errorf("%s: query names no toolsd series: %s", where, q)
	}
	used := map[string]bool{}
	for _, r := range refs {
		labels, ok := series[r[1]]
		if !ok {
			t.Errorf("%s: %s is not a series toolsd exports", where, r[1])
			continue
		}
		for k := range labels {
			used[k] = true
		}
		for _, m := range matcher.FindAllStringSubmatch(r[2], -1) {
			if !labels[m[1]] {
				t.Errorf("%s: %s has no label %q", where, r[1], m[1])
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(q, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !used[l] {
				t.Errorf("%s: groups by %q, which none of its series has", where, l)
			}
		}
	}
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatalf("ReadFile(%s) = %v", alertsFile, err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("decoding %s: %v", alertsFile, err)
	}
	series := exported(t)
	want := map[string]bool{
		"ToolsdHighCallErrorRatio": false, "ToolsdProviderGoneSpike": false, "ToolsdHookFailingClosed": false,
		"ToolsdSessionFsyncSlow": false, "ToolsdNoProvidersConnected": false, "ToolsdPanicsRecovered": false,
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if _, ok := want[r.Alert]; ok {
				want[r.Alert] = true
			}
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %q: want a name, a severity, a summary and a description", r.Alert)
			}
			checkQuery(t, r.Alert, r.Expr, series)
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s has no alert %s", alertsFile, name)
		}
	}
}

type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatalf("ReadFile(%s) = %v", dashboardFile, err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decoding %s: %v", dashboardFile, err)
	}
	series := exported(t)
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			checkQuery(t, "panel "+p.Title, tg.Expr, series)
			for _, r := range seriesRef.FindAllStringSubmatch(tg.Expr, -1) {
				queried[strings.TrimSuffix(r[1], "_bucket")] = true
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			checkQuery(t, "variable "+v.Name, v.Definition, series)
		}
	}
	// Every toolsd metric appears on the dashboard.
	for _, name := range metricNames {
		if !queried[name] {
			t.Errorf("no dashboard panel shows %s", name)
		}
	}
}
