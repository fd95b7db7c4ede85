package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/procs"
	"github.com/toolsd/toolsd/internal/tool"
)

const (
	alertsFile    = "../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../deploy/grafana/toolsd-dashboard.json"
)

// series is what a scrape of toolsd shows under one name.
type series struct {
	labels map[string]bool
	// counter: the series only goes up (a counter, or a histogram's _bucket, _sum and
	// _count), so queries take rate() or increase() of it, and of nothing else.
	counter bool
	// values holds, for the labels whose values form a closed set, the values the
	// series can carry.
	values map[string]map[string]bool
}

// closedLabels are the labels whose every value is known in advance: a query's
// matcher on one of them must name values toolsd can produce.
var closedLabels = []string{"code", "grpc_code", "outcome", "result", "stage"}

// resultCodes are the values of toolsd's code labels: every tool.Code and OK.
var resultCodes = []tool.Code{
	tool.CodeUnknownTool, tool.CodeInvalidArguments, tool.CodeDenied, tool.CodeGuardDenied,
	tool.CodeApprovalDenied, tool.CodeApprovalTimeout, tool.CodeApprovalUnavailable,
	tool.CodePolicyUnavailable, tool.CodeBlocked, tool.CodeToolError, tool.CodeToolTimeout,
	tool.CodeProviderGone, tool.CodeProviderUnavailable, tool.CodeProviderOverloaded,
	tool.CodeInvalidResult, tool.CodeResultTooLarge, tool.CodeAborted,
	tool.CodeAbortedBeforeDispatch, tool.CodeToolActivationFailed, tool.CodeInternal, "OK",
}

// exported maps every series name a scrape of toolsd shows (histograms as _bucket,
// _sum and _count) to its labels: this package's metrics, the gRPC server's,
// registered the way internal/server registers them, and the GOMAXPROCS controller's,
// registered the way internal/app registers them.
func exported(t *testing.T) map[string]*series {
	t.Helper()
	m, reg := newMetrics(t)
	exerciseAll(t, m)
	sm := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(sm)
	procs.New(procs.Options{}, reg, nil)
	noop := func(context.Context, any) (any, error) { return nil, nil }
	_, _ = sm.UnaryServerInterceptor()(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/toolsd.v1.ToolService/ListTools"}, noop)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	out := map[string]*series{}
	for _, mf := range mfs {
		s := &series{
			labels:  map[string]bool{"instance": true, "job": true},
			counter: mf.GetType() == dto.MetricType_COUNTER,
			values:  map[string]map[string]bool{},
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				s.labels[lp.GetName()] = true
				if s.values[lp.GetName()] == nil {
					s.values[lp.GetName()] = map[string]bool{}
				}
				s.values[lp.GetName()][lp.GetValue()] = true
			}
		}
		// A code label can carry any result code (grpc_code any gRPC code), not only
		// those this scrape happened to see.
		if s.labels["code"] {
			for _, c := range resultCodes {
				s.values["code"][string(c)] = true
			}
		}
		if s.labels["grpc_code"] {
			for c := codes.OK; c <= codes.Unauthenticated; c++ {
				s.values["grpc_code"][c.String()] = true
			}
		}
		names := []string{mf.GetName()}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			s.labels["le"] = true
			s.counter = true
			names = []string{mf.GetName() + "_bucket", mf.GetName() + "_sum", mf.GetName() + "_count"}
		}
		for _, n := range names {
			out[n] = s
		}
	}
	if len(out) == 0 || out["grpc_server_handled_total"] == nil {
		t.Fatalf("exported series = %v, want toolsd's and grpc_server_*", out)
	}
	return out
}

var (
	seriesRef = regexp.MustCompile(`\b((?:toolsd|grpc_server)_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	grouping  = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)
	// rateOf ends in a function that wants a counter, right before its argument.
	rateOf = regexp.MustCompile(`\b(?:rate|irate|increase)\s*\(\s*$`)
	// alternation is a regex matcher's value that only lists literal values.
	alternation = regexp.MustCompile(`^[A-Za-z0-9_]+(?:\|[A-Za-z0-9_]+)*$`)
)

// checkQuery fails when q names no toolsd or gRPC series, a series toolsd does not
// export, a label such a series does not have or a value a closed label cannot take;
// when it takes rate() or increase() of a gauge, or a counter without either; when a
// histogram's buckets are used other than by histogram_quantile over le. It returns
// the labels q keeps when it aggregates by (nil when it does not), for the legend or
// the annotations to check against.
func checkQuery(t *testing.T, where, q string, exp map[string]*series) map[string]bool {
	t.Helper()
	refs := seriesRef.FindAllStringSubmatchIndex(q, -1)
	if len(refs) == 0 {
		t.Errorf("%s: query names no toolsd series: %s", where, q)
	}
	used := map[string]bool{}
	buckets := false
	// A variable's label_values() lists a series' labels: any series will do.
	listing := strings.HasPrefix(q, "label_values(")
	for _, r := range refs {
		name, sel := q[r[2]:r[3]], ""
		if r[4] >= 0 {
			sel = q[r[4]:r[5]]
		}
		s, ok := exp[name]
		if !ok {
			t.Errorf("%s: %s is not a series toolsd exports", where, name)
			continue
		}
		for k := range s.labels {
			used[k] = true
		}
		buckets = buckets || strings.HasSuffix(name, "_bucket")
		switch rated := rateOf.MatchString(q[:r[0]]); {
		case listing:
		case rated && !s.counter:
			t.Errorf("%s: takes the rate of %s, which is not a counter", where, name)
		case !rated && s.counter:
			t.Errorf("%s: uses the counter %s without rate() or increase()", where, name)
		}
		for _, m := range matcher.FindAllStringSubmatch(sel, -1) {
			label, op, val := m[1], m[2], m[3]
			if !s.labels[label] {
				t.Errorf("%s: %s has no label %q", where, name, label)
				continue
			}
			if !slices.Contains(closedLabels, label) || strings.Contains(val, "$") {
				continue
			}
			vals := []string{val}
			if op == "=~" || op == "!~" {
				if !alternation.MatchString(val) {
					continue
				}
				vals = strings.Split(val, "|")
			}
			for _, v := range vals {
				if !s.values[label][v] {
					t.Errorf("%s: %s{%s} is never %q", where, name, label, v)
				}
			}
		}
	}
	var kept map[string]bool
	for _, g := range grouping.FindAllStringSubmatch(q, -1) {
		if g[1] == "by" && kept == nil {
			kept = map[string]bool{}
		}
		hasLe := false
		for l := range strings.SplitSeq(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !used[l] {
				t.Errorf("%s: groups by %q, which none of its series has", where, l)
			}
			hasLe = hasLe || l == "le"
			if g[1] == "by" {
				kept[l] = true
			}
		}
		if buckets && !hasLe {
			t.Errorf("%s: aggregates histogram buckets without keeping le: %s", where, q)
		}
	}
	if buckets && !strings.Contains(q, "histogram_quantile(") {
		t.Errorf("%s: uses histogram buckets outside histogram_quantile: %s", where, q)
	}
	return kept
}

// checkTemplate fails when text shows a label (ref's first group) that the query,
// which keeps only the labels in kept, drops. kept nil: the query does not aggregate.
func checkTemplate(t *testing.T, where, text string, ref *regexp.Regexp, kept map[string]bool) {
	t.Helper()
	if kept == nil {
		return
	}
	for _, m := range ref.FindAllStringSubmatch(text, -1) {
		if !kept[m[1]] {
			t.Errorf("%s: shows label %q, which its query aggregates away", where, m[1])
		}
	}
}

var (
	legendLabel     = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	annotationLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

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
		"ToolsdConfigReloadFailed": false,
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if _, ok := want[r.Alert]; ok {
				want[r.Alert] = true
			}
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %q: want a name, a severity, a summary and a description", r.Alert)
			}
			kept := checkQuery(t, r.Alert, r.Expr, series)
			for k, text := range r.Annotations {
				checkTemplate(t, r.Alert+" "+k, text, annotationLabel, kept)
				if out := expandAnnotation(t, r.Alert+" "+k, text, 1.03); r.Alert == "ToolsdPanicsRecovered" && k == "summary" && strings.Contains(out, "1.03") {
					// increase() extrapolates: one panic in the window reads 1.03.
					t.Errorf("%s summary shows the extrapolated count as it is: %q", r.Alert, out)
				}
			}
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s has no alert %s", alertsFile, name)
		}
	}
}

// expandAnnotation renders an alert annotation as Prometheus does: text after its
// $labels, $externalLabels and $value definitions, with stand-ins for the humanize
// functions the rules use. A template Prometheus could not render fails the test.
func expandAnnotation(t *testing.T, where, text string, value float64) string {
	t.Helper()
	funcs := template.FuncMap{
		"humanize":           func(v float64) string { return fmt.Sprintf("%.4g", v) },
		"humanizePercentage": func(v float64) string { return fmt.Sprintf("%.4g%%", v*100) },
		"humanizeDuration":   func(v float64) string { return fmt.Sprintf("%.4gs", v) },
	}
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
	tmpl, err := template.New(where).Funcs(funcs).Option("missingkey=zero").Parse(defs + text)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return ""
	}
	var out strings.Builder
	data := map[string]any{"Labels": map[string]string{"instance": "toolsd:9151"}, "ExternalLabels": map[string]string{}, "Value": value}
	if err := tmpl.Execute(&out, data); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	return out.String()
}

type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	// Panels are a collapsed row's.
	Panels []panel `json:"panels"`
}

// unit is the unit the panel draws the series named legend in: its default unless an
// override by that name sets one.
func (p panel) unit(legend string) string {
	u := p.FieldConfig.Defaults.Unit
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byName" || o.Matcher.Options != legend {
			continue
		}
		for _, prop := range o.Properties {
			if v, ok := prop.Value.(string); ok && prop.ID == "unit" {
				u = v
			}
		}
	}
	return u
}

// checkUnit fails when a panel draws q in a unit that does not fit it: a share must
// divide, a duration must be a histogram quantile, a per-second unit must be a rate.
func checkUnit(t *testing.T, where, unit, q string) {
	t.Helper()
	var fits bool
	switch unit {
	case "percentunit", "percent":
		fits = strings.Contains(q, "/")
	case "s", "ms":
		fits = strings.Contains(q, "histogram_quantile(")
	case "ops", "reqps":
		fits = strings.Contains(q, "rate(")
	default:
		return
	}
	if !fits {
		t.Errorf("%s: draws %s in unit %q", where, q, unit)
	}
}

// all returns ps and the panels of their collapsed rows.
func all(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, all(p.Panels)...)
	}
	return out
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
	for _, p := range all(d.Panels) {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			kept := checkQuery(t, "panel "+p.Title, tg.Expr, series)
			checkTemplate(t, "panel "+p.Title+" legend", tg.LegendFormat, legendLabel, kept)
			checkUnit(t, "panel "+p.Title, p.unit(tg.LegendFormat), tg.Expr)
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
	for _, name := range slices.Concat(metricNames, []string{"toolsd_runtime_procs", "toolsd_runtime_procs_changes_total"}) {
		if !queried[name] {
			t.Errorf("no dashboard panel shows %s", name)
		}
	}
}

// TestAlertedCodesStartAtZero: every code an alert matches on
// toolsd_pipeline_calls_total exists at 0 for a tool from its registration
// (CallObserver.PrepareTool). A series born at its first count shows no increase to
// rate(): a provider's first crash, a burst of PROVIDER_GONE in new series, would go
// unseen by the alerts.
func TestAlertedCodesStartAtZero(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatalf("ReadFile(%s) = %v", alertsFile, err)
	}
	codes := map[string]bool{}
	for _, ref := range seriesRef.FindAllStringSubmatch(string(raw), -1) {
		if ref[1] != "toolsd_pipeline_calls_total" {
			continue
		}
		for _, mt := range matcher.FindAllStringSubmatch(ref[2], -1) {
			if mt[1] == "code" && (mt[2] == "=" || mt[2] == "=~") {
				for _, c := range strings.Split(mt[3], "|") {
					codes[c] = true
				}
			}
		}
	}
	if !codes["PROVIDER_GONE"] {
		t.Fatalf("found codes %v in %s, want at least PROVIDER_GONE", codes, alertsFile)
	}
	m, reg := newMetrics(t)
	observe.NewCallObserver(m).PrepareTool("read")
	for c := range codes {
		if !has(t, reg, "toolsd_pipeline_calls_total", "tool", "read", "code", c) {
			t.Errorf("toolsd_pipeline_calls_total{tool=read,code=%s} not exported once read is registered", c)
			continue
		}
		if got := value(t, reg, "toolsd_pipeline_calls_total", "tool", "read", "code", c); got != 0 {
			t.Errorf("toolsd_pipeline_calls_total{tool=read,code=%s} = %v, want 0", c, got)
		}
	}
}
