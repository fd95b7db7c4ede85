// Command readmecheck runs the grpcurl commands of README.md against a real toolsd
// started the way `make run` starts it, and compares each command's output with the
// output block that follows it in the README. Volatile values (times, batch ids) are
// normalized on both sides. It also holds what the README says of toolsd's interface to
// toolsd itself: the flags it names (toolsd's -h and the example programs'), the config
// keys, the Limits table (a row for every limit, its default that of defaults.yaml, the
// bounds it notes those config enforces), the YAML config examples (they must load), the
// metrics with their labels (those toolsd registers, every one of them documented, and
// served on /metrics), the Go provider SDK's options (pkg/provider's, every one of them
// listed) and the quick start's go run command (make run's, flags and all). It exits
// non-zero on any difference.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
)

// example is one README command and the output the README promises.
type example struct {
	line    int
	command string
	want    string
	// outStart and outEnd are the line numbers (1-based) of the output block's body.
	outStart, outEnd int
}

func main() {
	readme := flag.String("readme", "README.md", "README to check")
	addr := flag.String("addr", "127.0.0.1:50151", "address the README's commands use")
	update := flag.Bool("update", false, "rewrite the README's output blocks with what the commands print")
	flag.Parse()
	if err := run(*readme, *addr, *update); err != nil {
		fmt.Fprintln(os.Stderr, "readmecheck:", err)
		os.Exit(1)
	}
}

func run(readme, addr string, update bool) error {
	text, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	examples := parse(string(text))
	if len(examples) == 0 {
		return errors.New("no grpcurl examples found")
	}
	dir, err := os.MkdirTemp("", "readmecheck")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bins, err := build(dir)
	if err != nil {
		return err
	}
	findings, metrics, err := checkDocs(readme, string(text), bins)
	if err != nil {
		return err
	}
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	stop, err := startToolsd(bins["toolsd"], dir, addr, admin)
	if err != nil {
		return err
	}
	defer stop()
	failed := 0
	outputs := make([]string, len(examples))
	for i, ex := range examples {
		got, err := runCommand(ex.command)
		if err != nil {
			got += "\n(exit: " + err.Error() + ")"
		}
		outputs[i] = got
		if normalize(got) != normalize(ex.want) {
			failed++
			fmt.Printf("FAIL README.md:%d: %s\n--- want\n%s\n--- got\n%s\n", ex.line, ex.command, ex.want, got)
			continue
		}
		fmt.Printf("ok   README.md:%d: %s\n", ex.line, firstLine(ex.command))
	}
	scrape, err := get("http://" + admin + "/metrics")
	if err != nil {
		return err
	}
	findings = append(findings, checkScrape(scrape, metrics)...)
	for _, f := range findings {
		if f.line > 0 {
			fmt.Printf("FAIL %s:%d: %s\n", readme, f.line, f.msg)
		} else {
			fmt.Printf("FAIL %s: %s\n", readme, f.msg)
		}
	}
	if update {
		return rewrite(readme, string(text), examples, outputs)
	}
	fmt.Printf("%d passed, %d failed; %d statements about flags, config and metrics wrong\n",
		len(examples)-failed, failed, len(findings))
	if failed > 0 || len(findings) > 0 {
		return fmt.Errorf("%d README examples differ, %d statements are wrong", failed, len(findings))
	}
	return nil
}

// build compiles toolsd and the example programs whose flags the README names into dir.
func build(dir string) (map[string]string, error) {
	bins := map[string]string{}
	for name, pkg := range map[string]string{
		"toolsd": "./cmd/toolsd", "agent": "./examples/agent", "hook": "./examples/hook", "provider": "./examples/provider",
	} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bins[name], pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	return bins, nil
}

// checkDocs runs the checks that need no running toolsd; it returns their findings and
// the metrics toolsd registers, for the scrape.
func checkDocs(readme, text string, bins map[string]string) ([]finding, map[string][]string, error) {
	flags := map[string]map[string]bool{}
	for name, bin := range bins {
		f, err := flagsOf(bin)
		if err != nil {
			return nil, nil, err
		}
		flags[name] = f
	}
	node, err := nodeFlagsOf(filepath.Join("examples", "node"))
	if err != nil {
		return nil, nil, err
	}
	flags["node"] = node
	keys, err := configKeys()
	if err != nil {
		return nil, nil, err
	}
	defaults, err := config.DefaultPaths()
	if err != nil {
		return nil, nil, err
	}
	metrics, err := toolsdMetrics()
	if err != nil {
		return nil, nil, err
	}
	sdk, err := sdkOptions(filepath.Join("pkg", "provider"))
	if err != nil {
		return nil, nil, err
	}
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		return nil, nil, err
	}
	spans := codeSpans(text)
	var out []finding
	out = append(out, checkFlags(spans, flags["toolsd"], flags["agent"], flags["hook"], flags["provider"], flags["node"])...)
	out = append(out, checkKeys(spans, keys)...)
	rows := limitsRows(text)
	out = append(out, checkLimitsTable(rows, defaults)...)
	out = append(out, checkLimitsCovered(rows, defaults)...)
	out = append(out, checkLimitsBounds(rows, defaults)...)
	out = append(out, checkTableIndent(text)...)
	out = append(out, checkYAMLBlocks(readme, text)...)
	out = append(out, checkMetrics(text, metrics)...)
	out = append(out, checkSDKOptions(text, sdk)...)
	out = append(out, checkRunCommand(text, string(makefile))...)
	return out, metrics, nil
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// get returns the body of an HTTP GET of url.
func get(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

// parse finds every ```sh block whose command is a grpcurl call and that is followed by
// an output block (the next fenced block, of any other language).
func parse(text string) []example {
	var out []example
	type block struct {
		line, end int
		lang      string
		body      string
	}
	var blocks []block
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *block
	var buf strings.Builder
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &block{line: n, lang: strings.TrimPrefix(line, "```")}
				buf.Reset()
				continue
			}
			cur.body = buf.String()
			cur.end = n
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			buf.WriteString(line)
			buf.WriteByte('\n')
		}
	}
	for i := 0; i+1 < len(blocks); i++ {
		b := blocks[i]
		cmd := strings.TrimSpace(b.body)
		if b.lang != "sh" || !strings.HasPrefix(cmd, "grpcurl ") || blocks[i+1].lang == "sh" {
			continue
		}
		o := blocks[i+1]
		out = append(out, example{line: b.line, command: cmd, want: o.body, outStart: o.line + 1, outEnd: o.end - 1})
		i++
	}
	return out
}

func runCommand(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var volatile = []*regexp.Regexp{
	regexp.MustCompile(`"time": "[^"]*"`),
	regexp.MustCompile(`"batchId": "[^"]*"`),
	regexp.MustCompile(`"epoch": "[^"]*"`),
	regexp.MustCompile(`"toolSetId": "[^"]*"`),
	regexp.MustCompile(`"restrictionId": "[^"]*"`),
	regexp.MustCompile(`"providerId": "[^"]*"`),
	regexp.MustCompile(`"connectedAt": "[^"]*"`),
}

// deadlineMessage is grpcurl's message for a deadline, which depends on which side's
// timer fired first: the client's ("context deadline exceeded"), or toolsd's, whose
// gRPC server resets the stream at the deadline it was sent ("stream terminated by
// RST_STREAM with error code: CANCEL"), as on a loaded machine.
var deadlineMessage = regexp.MustCompile(`(Code: DeadlineExceeded\n\s*Message: )[^\n]*`)

func normalize(s string) string {
	for _, re := range volatile {
		s = re.ReplaceAllStringFunc(s, func(m string) string { key, _, _ := strings.Cut(m, ":"); return key + `: "…"` })
	}
	s = deadlineMessage.ReplaceAllString(s, "${1}…")
	return strings.TrimSpace(s)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// startToolsd starts the toolsd binary bin like `make run` (its files in dir, its admin
// listener on admin), then waits until the example provider's tools are registered.
func startToolsd(bin, dir, addr, admin string) (stop func(), err error) {
	// The README's commands name this address: a toolsd already listening there (make
	// run in another terminal) would answer them instead of the one started here.
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s is taken (is make run still running?): the README's commands use it: %w", addr, err)
	}
	_ = probe.Close()
	cfg, err := filepath.Abs("examples/toolsd.yaml")
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "toolsd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", cfg, "-example-provider", "-ephemeral", "-listen", addr,
		"-admin-listen", admin, "-notes-file", filepath.Join(dir, "notes.txt"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
	}
	if err := waitReady(addr, exited); err != nil {
		stop()
		log, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("%w\ntoolsd log:\n%s", err, log)
	}
	return stop, nil
}

// waitReady waits until the toolsd at addr serves the example tools, or exited closes.
func waitReady(addr string, exited <-chan struct{}) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, herr := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		s, serr := toolsdv1.NewToolServiceClient(conn).Schemas(ctx, &toolsdv1.SchemasRequest{})
		cancel()
		if herr == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING && serr == nil && len(s.GetTools()) >= 5 {
			return nil
		}
		select {
		case <-exited:
			return errors.New("toolsd exited before it was ready")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("toolsd did not become ready with the example tools within 30s")
}

// rewrite replaces each example's output block body with what its command printed.
func rewrite(path, text string, examples []example, outputs []string) error {
	lines := strings.Split(text, "\n")
	for i := len(examples) - 1; i >= 0; i-- {
		ex := examples[i]
		body := strings.Split(strings.TrimRight(outputs[i], "\n"), "\n")
		next := make([]string, 0, len(lines)+len(body))
		next = append(next, lines[:ex.outStart-1]...)
		next = append(next, body...)
		lines = append(next, lines[ex.outEnd:]...)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}
