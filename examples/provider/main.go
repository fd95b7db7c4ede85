// Command provider is a runnable example tool provider: it connects to toolsd, registers
// the tools of package exampletools and serves their calls until interrupted,
// reconnecting whenever the stream breaks.
//
//	go run ./examples/provider -addr 127.0.0.1:50151
//
// Against a toolsd that serves TLS (README, Security), -ca names the CA of its
// certificate, -cert and -key a client certificate, -token-file a bearer token.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolsd/toolsd/examples/internal/dialflags"
	"github.com/toolsd/toolsd/examples/provider/exampletools"
	"github.com/toolsd/toolsd/pkg/provider"
)

const version = "0.1.0"

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2) // parseFlags printed the error and the usage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

// options are the provider's flags.
type options struct {
	addr, name, scope, notes string
	conn                     *dialflags.Flags
}

// parseFlags reads the command line, which holds flags only: parsing stops at the first
// other argument, so one given by mistake (the address without -addr) would otherwise
// be ignored, and every flag after it with it. It prints its errors, with the usage, as
// package flag prints those of the flags.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:50151", "toolsd gRPC address")
	fs.StringVar(&o.name, "name", "example", "provider name reported to toolsd")
	fs.StringVar(&o.scope, "scope", "", `scope to register the tools in ("" is global)`)
	fs.StringVar(&o.notes, "notes", "notes.txt", "file that write_note appends to")
	o.conn = dialflags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	err := o.conn.Check()
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: the provider takes only flags (the toolsd address is -addr HOST:PORT)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
	}
	return o, err
}

// run serves the tools until ctx ends.
func run(ctx context.Context, o options) error {
	log, err := zap.NewDevelopment(zap.AddStacktrace(zapcore.ErrorLevel))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	dial, err := o.conn.DialOptions()
	if err != nil {
		return err
	}
	p := provider.New(o.name, provider.WithVersion(version), provider.WithLogger(log), provider.WithScope(o.scope),
		provider.WithDialOptions(dial...))
	p.Add(exampletools.Tools(o.notes)...)
	log.Info("example provider starting", zap.String("addr", o.addr), zap.Bool("tls", o.conn.TLS()), zap.String("notes", o.notes))
	if err := p.Run(ctx, o.addr); err != nil {
		return err
	}
	log.Info("example provider stopped")
	return nil
}
