package provider_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// silentToolsd takes every Connect stream, reads the hello and never answers.
type silentToolsd struct {
	toolsdv1.UnimplementedProviderServiceServer
	hellos atomic.Int32
}

func (s *silentToolsd) Connect(stream grpc.BidiStreamingServer[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	s.hellos.Add(1)
	<-stream.Context().Done()
	return nil
}

// A server that takes the stream and never welcomes ends the session once the welcome
// wait passes, with an error that says so; Run connects again.
func TestNoWelcomeEndsTheSession(t *testing.T) {
	srv := &silentToolsd{}
	addr := startScripted(t, srv)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient() = %v", err)
	}
	defer conn.Close()
	p := provider.New("p", provider.WithWelcomeTimeout(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not a speed check
	defer cancel()
	err = p.Serve(ctx, conn)
	if ctx.Err() != nil {
		t.Fatal("Serve still waited for a welcome after a minute")
	}
	if err == nil || !strings.Contains(err.Error(), "no welcome from toolsd within 50ms") {
		t.Fatalf("Serve() = %v, want the welcome wait's error", err)
	}

	runCtx, stop := context.WithCancel(context.Background())
	p2 := provider.New("p", provider.WithWelcomeTimeout(20*time.Millisecond), provider.WithBackoff(time.Millisecond, 10*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- p2.Run(runCtx, addr) }()
	before := srv.hellos.Load()
	for end := time.Now().Add(time.Minute); srv.hellos.Load() < before+3; {
		if time.Now().After(end) {
			t.Fatalf("Run said hello %d times in a minute, want it to reconnect after each welcome wait", srv.hellos.Load()-before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
}
