// Command hook is a runnable example remote hook: it connects to toolsd's HookService
// and applies the policy of package examplehook until interrupted, reconnecting
// whenever the stream breaks.
//
//	go run ./examples/hook -addr 127.0.0.1:50151
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/toolsd/toolsd/examples/hook/examplehook"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hook:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:50151", "toolsd gRPC address")
	token := flag.String("token", "", "bearer token, when toolsd requires authentication")
	flag.Parse()

	log, err := zap.NewDevelopment()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}

	// The stream is reopened every second; gRPC's own connection backoff (growing to two
	// minutes) would otherwise leave every reopened stream failing long after toolsd is
	// back.
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: time.Second, Multiplier: 1, MaxDelay: time.Second}, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	log.Info("example hook starting", zap.String("addr", *addr))
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
