package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline/policy"
	"github.com/toolsd/toolsd/internal/procs"
)

// finding is one thing the README says that toolsd does not bear out.
type finding struct {
	line int
	msg  string
}

// span is one inline code span of the README (outside fenced blocks), with the line it
// starts on.
type span struct {
	line int
	text string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans lists the README's inline code spans; a span may wrap across lines.
func codeSpans(text string) []span {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	prose := strings.Join(lines, "\n")
	var out []span
	for _, m := range codeSpan.FindAllStringSubmatchIndex(prose, -1) {
		t := strings.Join(strings.Fields(prose[m[2]:m[3]]), " ")
		out = append(out, span{line: 1 + strings.Count(prose[:m[0]], "\n"), text: t})
	}
	return out
}

// helpFlag is a flag line of a Go program's -h output.
var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_-]*)`)

// flagsOf runs bin -h and returns the flags its usage lists.
func flagsOf(bin string) (map[string]bool, error) {
	out, err := exec.Command(bin, "-h").CombinedOutput()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("%s -h: %w", bin, err)
	}
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("%s -h lists no flags:\n%s", bin, out)
	}
	return flags, nil
}

// nodeOption is an option of a Node example's parseArgs call:
// `addr: { type: 'string', … }` or `'retake-window-ms': { type: 'string', … }`.
var nodeOption = regexp.MustCompile(`(?m)^\s+'?([a-z][a-z0-9-]*)'?:\s*\{\s*type:\s*'(?:string|boolean)'`)

// nodeFlagsOf returns the options the Node example programs in dir parse.
func nodeFlagsOf(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.mjs"))
	if err != nil {
		return nil, err
	}
	flags := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range nodeOption.FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no parseArgs options in %s/*.mjs", dir)
	}
	return flags, nil
}

// flagName is the name of a command-line word that is a flag ("-listen", "--addr",
// "-approve=false"), or "".
func flagName(word string) string {
	if !strings.HasPrefix(word, "-") {
		return ""
	}
	name := strings.TrimLeft(word, "-")
	name, _, _ = strings.Cut(name, "=")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return ""
	}
	return name
}

// checkFlags holds the README's flags to the programs it documents: a code span that
// starts with a flag must name a flag of toolsd or of an example program (examples
// holds their flags), a flag after the word toolsd in a span must be one of toolsd's,
// and every flag of toolsd must be mentioned.
func checkFlags(spans []span, toolsd map[string]bool, examples ...map[string]bool) []finding {
	var out []finding
	mentioned := map[string]bool{}
	known := func(name string) bool {
		if toolsd[name] {
			return true
		}
		for _, ex := range examples {
			if ex[name] {
				return true
			}
		}
		return false
	}
	for _, s := range spans {
		words := strings.Fields(s.text)
		if len(words) == 0 {
			continue
		}
		if name := flagName(words[0]); name != "" {
			mentioned[name] = true
			if !known(name) {
				out = append(out, finding{s.line, fmt.Sprintf("flag %q: neither toolsd nor an example program has it", words[0])})
			}
		}
		at := slices.Index(words, "toolsd")
		if at < 0 {
			continue
		}
		for _, w := range words[at+1:] {
			name := flagName(w)
			if name == "" {
				continue
			}
			mentioned[name] = true
			if !toolsd[name] {
				out = append(out, finding{s.line, fmt.Sprintf("%q: toolsd has no flag %q", s.text, w)})
			}
		}
	}
	for _, name := range sortedKeys(toolsd) {
		if !mentioned[name] {
			out = append(out, finding{0, fmt.Sprintf("toolsd's flag -%s is not documented", name)})
		}
	}
	return out
}

// configKeys lists every dotted key of toolsd's config: the yaml fields of
// config.Config, and the keys of the embedded defaults (the policy section's included).
func configKeys() (map[string]bool, error) {
	keys := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			keys[path] = true
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[yaml.Node]() {
				walk(f.Type, path+".")
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	defaults, err := config.DefaultPaths()
	if err != nil {
		return nil, err
	}
	for path := range defaults {
		keys[path] = true
	}
	return keys, nil
}

// dottedKey is a config key as the README writes one: a top-level section, a dot and
// more, at the start of a code span ("limits.max_result_bytes", "registry.pinning: refuse").
var dottedKey = regexp.MustCompile(`^([a-z_]+)((?:\.[a-z_]+)+)(?:$|[: ])`)

// checkKeys holds every dotted config key the README names to toolsd's config.
func checkKeys(spans []span, keys map[string]bool) []finding {
	var out []finding
	for _, s := range spans {
		m := dottedKey.FindStringSubmatch(s.text)
		if m == nil || !keys[m[1]] {
			continue // not a config section: a file name, a Go identifier, ...
		}
		if key := m[1] + m[2]; !keys[key] {
			out = append(out, finding{s.line, fmt.Sprintf("config key %q does not exist", key)})
		}
	}
	return out
}

// limitsRow is a row of the README's Limits table: the keys its first cell names
// ("`limits.a` / `b`" names limits.a and limits.b) and its defaults cell.
type limitsRow struct {
	line     int
	keys     []string
	defaults string
}

// limitsHeader is the header row of the README's Limits table.
var limitsHeader = regexp.MustCompile(`^\| *key *\| *default *\|`)

// limitsRows lists the rows of the README's Limits table, the table headed
// "| key | default | …": every row of it, so that a row naming no config key at all
// is held to the defaults too rather than passed over.
func limitsRows(text string) []limitsRow {
	var out []limitsRow
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case limitsHeader.MatchString(line):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "|-") || strings.HasPrefix(line, "| -"):
			continue // the separator row
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			out = append(out, limitsRow{line: n, keys: []string{strings.TrimSpace(line)}})
			continue
		}
		var keys []string
		for _, k := range strings.Split(cells[1], "/") {
			k = strings.Trim(strings.TrimSpace(k), "`")
			if len(keys) > 0 && !strings.Contains(k, ".") {
				section, _, _ := strings.Cut(keys[0], ".")
				k = section + "." + k
			}
			keys = append(keys, k)
		}
		out = append(out, limitsRow{line: n, keys: keys, defaults: strings.TrimSpace(cells[2])})
	}
	return out
}

// parenthetical is a remark in a default's cell: "64 (at most 10000)".
var parenthetical = regexp.MustCompile(`\s*\([^)]*\)`)

// checkLimitsTable holds each row of the README's Limits table (its keys and their
// defaults) to the embedded defaults: a key with none is no key of toolsd's.
func checkLimitsTable(rows []limitsRow, defaults map[string]*yaml.Node) []finding {
	var out []finding
	for _, r := range rows {
		values := strings.Split(parenthetical.ReplaceAllString(r.defaults, ""), "/")
		if len(values) != len(r.keys) {
			out = append(out, finding{r.line, fmt.Sprintf("%d keys but %d defaults: %q", len(r.keys), len(values), r.defaults)})
			continue
		}
		for i, k := range r.keys {
			v := defaults[k]
			if v == nil {
				out = append(out, finding{r.line, fmt.Sprintf("%s has no embedded default (no such key?)", k)})
				continue
			}
			if doc := strings.TrimSpace(values[i]); !sameValue(doc, v.Value) {
				out = append(out, finding{r.line, fmt.Sprintf("%s: the README says its default is %s, defaults.yaml %s", k, doc, v.Value)})
			}
		}
	}
	if len(rows) == 0 {
		out = append(out, finding{0, "no Limits table rows (| key | default | … then | `limits.…` | … |) found"})
	}
	return out
}

// checkLimitsCovered holds the README's Limits table to every limit: each limits.* key
// of the embedded defaults has a row, so a limit added to config is documented with it.
func checkLimitsCovered(rows []limitsRow, defaults map[string]*yaml.Node) []finding {
	documented := map[string]bool{}
	for _, r := range rows {
		for _, k := range r.keys {
			documented[k] = true
		}
	}
	var out []finding
	for _, k := range sortedKeys(defaults) {
		if strings.HasPrefix(k, "limits.") && defaults[k].Kind == yaml.ScalarNode && !documented[k] {
			out = append(out, finding{0, fmt.Sprintf("%s has no row in the Limits table", k)})
		}
	}
	return out
}

// checkTableIndent holds each table row to its table's indentation: a row indented
// otherwise than the row above it ends the table, and in a list item GitHub shows it
// and the rows after it as one paragraph of pipes.
func checkTableIndent(text string) []finding {
	var out []finding
	prev := -1 // the indentation of the table row above, -1 when the line above is none
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		rest := strings.TrimLeft(line, " ")
		if !strings.HasPrefix(rest, "|") {
			prev = -1
			continue
		}
		indent := len(line) - len(rest)
		if prev >= 0 && indent != prev {
			out = append(out, finding{n, fmt.Sprintf("table row indented %d spaces, its table %d", indent, prev)})
		}
		prev = indent
	}
	return out
}

// sameValue compares a documented default with the embedded one: equal text, or the
// same size or duration however written ("1MiB" and "1048576", "60s" and "1m").
func sameValue(doc, def string) bool {
	if doc == def {
		return true
	}
	if a, err := config.ParseSize(doc); err == nil {
		b, err := config.ParseSize(def)
		return err == nil && a == b
	}
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(def)
		return err == nil && a == b
	}
	return false
}

// yamlBlock is a fenced ```yaml block of the README with the line its text starts on.
type yamlBlock struct {
	line int
	text string
}

func yamlBlocks(text string) []yamlBlock {
	var out []yamlBlock
	var cur *yamlBlock
	var body strings.Builder
	for n, l := range strings.Split(text, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```yaml":
			cur = &yamlBlock{line: n + 2}
			body.Reset()
		case cur != nil && strings.HasPrefix(l, "```"):
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(l + "\n")
		}
	}
	return out
}

// checkYAMLBlocks loads every YAML config example of the README (named readme in
// errors) as toolsd loads a config file: over the defaults, validated, its policy
// section parsed.
func checkYAMLBlocks(readme, text string) []finding {
	var out []finding
	for _, b := range yamlBlocks(text) {
		// Blank lines before the block make the errors' locations the README's.
		data := []byte(strings.Repeat("\n", b.line-1) + b.text)
		source := readme
		cfg, err := config.Parse(data, source)
		if err == nil {
			_, err = policy.ParseNode(&cfg.Policy, source, policy.WithMaxResultBytes(int(cfg.Limits.MaxResultBytes)))
		}
		if err != nil {
			out = append(out, finding{b.line, fmt.Sprintf("the YAML example does not load: %v", err)})
		}
	}
	return out
}

// describer is a prometheus.Registerer that only collects what is registered on it.
type describer struct{ descs []*prometheus.Desc }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 1024)
	c.Describe(ch)
	close(ch)
	for desc := range ch {
		d.descs = append(d.descs, desc)
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^{}]*)\}\}$`)
)

// toolsdMetrics maps each metric toolsd registers (internal/observe, internal/procs) to its labels,
// whether or not a scrape shows it yet (a vector shows no series before its first use).
func toolsdMetrics() (map[string][]string, error) {
	var d describer
	observe.New(&d)
	procs.New(procs.Options{Max: 1}, &d, nil)
	out := map[string][]string{}
	for _, desc := range d.descs {
		s := desc.String()
		name, labels := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
		if name == nil || labels == nil {
			return nil, fmt.Errorf("cannot read the metric descriptor %s", s)
		}
		var ls []string
		for _, l := range strings.Split(labels[1], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				ls = append(ls, l)
			}
		}
		sort.Strings(ls)
		out[name[1]] = ls
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("observe.New registered no metrics")
	}
	return out, nil
}

// metricRef is a toolsd series the README names, with the labels it gives it:
// toolsd_pipeline_calls_total{tool,code} or toolsd_hook_failures_total{outcome="fail_open"}.
var metricRef = regexp.MustCompile(`\btoolsd_[a-z0-9_]+(\{[^}]*\})?`)

// checkMetrics holds the README's toolsd_* series to those toolsd registers: each named
// one exists, with the labels written after it (all of them when the README lists
// labels rather than matching values), and each registered one is documented.
func checkMetrics(text string, metrics map[string][]string) []finding {
	var out []finding
	named := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		for _, m := range metricRef.FindAllStringSubmatch(sc.Text(), -1) {
			name, _, _ := strings.Cut(m[0], "{")
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suffix); base != name {
					if _, ok := metrics[base]; ok {
						name = base
					}
				}
			}
			labels, ok := metrics[name]
			if !ok {
				out = append(out, finding{n, fmt.Sprintf("%s: toolsd has no such metric", name)})
				continue
			}
			named[name] = true
			if m[1] == "" {
				continue
			}
			var given []string
			matching := false
			for _, l := range strings.Split(strings.Trim(m[1], "{}"), ",") {
				l, _, eq := strings.Cut(l, "=")
				matching = matching || eq
				given = append(given, strings.TrimRight(strings.TrimSpace(l), "=~!"))
			}
			for _, l := range given {
				if !slices.Contains(labels, l) {
					out = append(out, finding{n, fmt.Sprintf("%s has no label %q (its labels: %v)", name, l, labels)})
				}
			}
			sort.Strings(given)
			if !matching && !slices.Equal(given, labels) {
				out = append(out, finding{n, fmt.Sprintf("%s: the README lists the labels %v, toolsd has %v", m[0], given, labels)})
			}
		}
	}
	for _, name := range sortedKeys(metrics) {
		if !named[name] {
			out = append(out, finding{0, fmt.Sprintf("metric %s is not documented", name)})
		}
	}
	return out
}

// scrapeType is a metric family's TYPE line in a /metrics scrape.
var scrapeType = regexp.MustCompile(`(?m)^# TYPE (toolsd_[a-z0-9_]+) `)

// checkScrape holds a live scrape of toolsd to the metrics it registers: each one
// without labels, which has its series from the start, is served.
func checkScrape(scrape string, metrics map[string][]string) []finding {
	served := map[string]bool{}
	for _, m := range scrapeType.FindAllStringSubmatch(scrape, -1) {
		served[m[1]] = true
	}
	var out []finding
	for _, name := range sortedKeys(metrics) {
		if len(metrics[name]) == 0 && !served[name] {
			out = append(out, finding{0, fmt.Sprintf("metric %s is not in toolsd's /metrics", name)})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
