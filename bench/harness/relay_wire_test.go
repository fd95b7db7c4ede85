package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/toolsd/toolsd/bench/load"
)

// pingProxy forwards TCP connections to upstream and counts the HTTP/2 PING frames (not
// acks) each side sends: toServer from the clients, toClient from the server.
type pingProxy struct {
	lis                net.Listener
	upstream           string
	toServer, toClient atomic.Int64
	wg                 sync.WaitGroup
}

func startPingProxy(tb testing.TB, upstream string) *pingProxy {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pingProxy{lis: lis, upstream: upstream}
	p.wg.Go(p.accept)
	tb.Cleanup(func() {
		_ = lis.Close()
		p.wg.Wait()
	})
	return p
}

func (p *pingProxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.pipe(u, c, &p.toServer, true) })
		p.wg.Go(func() { p.pipe(c, u, &p.toClient, false) })
	}
}

// pipe copies src to dst and counts PINGs in what passes.
func (p *pingProxy) pipe(dst, src net.Conn, pings *atomic.Int64, preface bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(pr)
		if preface {
			if _, err := io.ReadFull(r, make([]byte, len(http2.ClientPreface))); err != nil {
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		fr := http2.NewFramer(nil, r)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				_, _ = io.Copy(io.Discard, r)
				return
			}
			if pf, ok := f.(*http2.PingFrame); ok && !pf.IsAck() {
				pings.Add(1)
			}
		}
	}()
	_, err := io.Copy(io.MultiWriter(dst, pw), src)
	_ = pw.CloseWithError(errors.Join(err, io.EOF))
	<-done
}

// TestRelayTransportSendsNoPings: toolsd's server and the SDK provider run with fixed
// flow-control windows, so neither sends gRPC's bandwidth-estimation PINGs. The relay is
// toolsd's hops with nothing on top; if its server or provider pings per burst, the
// baseline carries frames (a write and a read on each side) that toolsd does not.
func TestRelayTransportSendsNoPings(t *testing.T) {
	srv, info, err := startRole(t.Context(), "relay-server")
	if err != nil {
		t.Fatal(err)
	}
	defer stopChecked(t, srv)
	provProxy := startPingProxy(t, info.Addr)
	prov, _, err := startRole(t.Context(), "relay-provider", "-target", provProxy.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stopChecked(t, prov)
	agentProxy := startPingProxy(t, info.Addr)
	w := load.Workload{Name: "pings", Agents: 2, BatchSize: 4, ArgBytes: 16 << 10, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond}
	if _, err := load.Run(t.Context(), w, load.BatchDialer(agentProxy.lis.Addr().String(), "pings")); err != nil {
		t.Fatal(err)
	}
	if n := provProxy.toServer.Load(); n != 0 {
		t.Errorf("relay provider sent %d PINGs, want 0 (the SDK provider's windows are fixed)", n)
	}
	if n := provProxy.toClient.Load() + agentProxy.toClient.Load(); n != 0 {
		t.Errorf("relay server sent %d PINGs, want 0 (toolsd's windows are fixed)", n)
	}
}
