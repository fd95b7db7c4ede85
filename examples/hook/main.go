// Command hook is a runnable example remote hook: it connects to toolsd's HookService
// and applies the policy of package examplehook until interrupted, reconnecting
// whenever the stream breaks.
//
//	go run ./examples/hook -addr 127.0.0.1:50151
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
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"

	"github.com/toolsd/toolsd/examples/hook/examplehook"
	"github.com/toolsd/toolsd/examples/internal/dialflags"
)

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
		fmt.Fprintln(os.Stderr, "hook:", err)
		os.Exit(1)
	}
}

// options are the hook's flags.
type options struct {
	addr string
	conn *dialflags.Flags
}

// parseFlags reads the command line, which holds flags only: parsing stops at the first
// other argument, so one given by mistake (the address without -addr) would otherwise
// be ignored, and every flag after it with it. It prints its errors, with the usage, as
// package flag prints those of the flags.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("hook", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:50151", "toolsd gRPC address")
	o.conn = dialflags.Register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	err := o.conn.Check()
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: the hook takes only flags (the toolsd address is -addr HOST:PORT)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
	}
	return o, err
}

// run answers toolsd's requests, reconnecting, until ctx ends.
func run(ctx context.Context, o options) error {
	// Stacks only for errors: a reconnect warning comes once a second while toolsd is down.
	log, err := zap.NewDevelopment(zap.AddStacktrace(zapcore.ErrorLevel))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	dial, err := o.conn.DialOptions()
	if err != nil {
		return err
	}

	// The stream is reopened every second; gRPC's own connection backoff (growing to two
	// minutes) would otherwise leave every reopened stream failing long after toolsd is
	// back. Keepalive pings (every 10s without traffic, within toolsd's limit of one per
	// 5s) find a toolsd that vanished without closing the connection in seconds, not
	// after TCP's minutes.
	conn, err := grpc.NewClient(o.addr, append(dial,
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: time.Second, Multiplier: 1, MaxDelay: time.Second}, MinConnectTimeout: 5 * time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}))...)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	log.Info("example hook starting", zap.String("addr", o.addr), zap.Bool("tls", o.conn.TLS()))
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("example hook stopped")
			return nil
		case <-retry.C:
		}
		if err := examplehook.Run(ctx, conn, log); err != nil {
			log.Warn("hook stream ended; reconnecting in 1s", zap.Error(err))
		}
		retry.Reset(time.Second)
	}
}
