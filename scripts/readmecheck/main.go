// Command readmecheck runs the grpcurl commands of README.md against a real toolsd
// started the way `make run` starts it, and compares each command's output with the
// output block that follows it in the README. Volatile values (times, batch ids) are
// normalized on both sides. It exits non-zero on any difference.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
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
	stop, err := startToolsd(addr)
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
	if update {
		return rewrite(readme, string(text), examples, outputs)
	}
	fmt.Printf("%d passed, %d failed\n", len(examples)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d README examples differ", failed)
	}
	return nil
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
	regexp.MustCompile(`"toolSetId": "[^"]*"`),
	regexp.MustCompile(`"restrictionId": "[^"]*"`),
}

func normalize(s string) string {
	for _, re := range volatile {
		s = re.ReplaceAllStringFunc(s, func(m string) string { key, _, _ := strings.Cut(m, ":"); return key + `: "…"` })
	}
	return strings.TrimSpace(s)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// startToolsd builds toolsd and starts it like `make run`, then waits until the example
// provider's tools are registered.
func startToolsd(addr string) (stop func(), err error) {
	// The README's commands name this address: a toolsd already listening there (make
	// run in another terminal) would answer them instead of the one started here.
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s is taken (is make run still running?): the README's commands use it: %w", addr, err)
	}
	_ = probe.Close()
	dir, err := os.MkdirTemp("", "readmecheck")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "toolsd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/toolsd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building toolsd: %w", err)
	}
	cfg, err := filepath.Abs("examples/toolsd.yaml")
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "toolsd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", cfg, "-example-provider", "-ephemeral", "-listen", addr,
		"-admin-listen", "127.0.0.1:0", "-notes-file", filepath.Join(dir, "notes.txt"))
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
		_ = os.RemoveAll(dir)
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
