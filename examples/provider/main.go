// Command provider is a runnable example tool provider: it connects to toolsd, registers
// the tools of package exampletools and serves their calls until interrupted,
// reconnecting whenever the stream breaks.
//
//	go run ./examples/provider -addr 127.0.0.1:50151
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	"github.com/toolsd/toolsd/pkg/provider"
)

const version = "0.1.0"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:50151", "toolsd gRPC address")
	name := flag.String("name", "example", "provider name reported to toolsd")
	scope := flag.String("scope", "", `scope to register the tools in ("" is global)`)
	notes := flag.String("notes", "notes.txt", "file that write_note appends to")
	flag.Parse()

	log, err := zap.NewDevelopment(zap.AddStacktrace(zapcore.ErrorLevel))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	p := provider.New(*name, provider.WithVersion(version), provider.WithLogger(log), provider.WithScope(*scope))
	p.Add(exampletools.Tools(*notes)...)
	log.Info("example provider starting", zap.String("addr", *addr), zap.String("notes", *notes))
	if err := p.Run(ctx, *addr); err != nil {
		return err
	}
	log.Info("example provider stopped")
	return nil
}
