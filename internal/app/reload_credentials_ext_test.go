package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/devpki"
)

// writeFile writes text to path, as an operator's edit or a secret manager's rotation does.
func writeFile(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestReloadAppliesTheTokenFile is what SIGHUP does after an operator revoked a token by
// deleting its line and issued another: from its next RPC the revoked token is refused
// (UNAUTHENTICATED, INVALID_TOKEN) and the new one accepted, while a stream the revoked
// token opened keeps running (a stream is authenticated once, when it opens). A token
// file the reload cannot read is refused whole: the reload counts as failed and the
// tokens in force stay.
func TestReloadAppliesTheTokenFile(t *testing.T) {
	const tokenAgentANew = "agent-a-token-renewed-0b5d8e2f6a"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.txt")
	writeFile(t, tokens, tokenAgentA+" agent-a\n"+tokenOperator+" operator\n")
	text := baseConfig + fmt.Sprintf(`
auth:
  token_file: %s
  grants:
    - {identity: agent-a, role: agent, scopes: ["tenant-a/**"]}
    - {identity: operator, role: operator}
`, tokens)
	cfgPath := filepath.Join(dir, "toolsd.yaml")
	writeFile(t, cfgPath, text)
	e := start(t, text[len(baseConfig):])
	agentA, agentANew, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentANew), e.as(t, tokenOperator)
	schemas := func(c *env) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := c.tools.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: "tenant-a"})
		return err
	}
	unknown := func(session string, step uint64) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Scope: "tenant-a", Step: step, Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`)}}
	}

	agentA.mustExecute(t, unknown("s-revoked", 0), batchOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	watch, err := agentA.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s-revoked"})
	if err != nil {
		t.Fatalf("WatchSession(s-revoked) as agent-a = %v", err)
	}
	for range 2 { // the call and its result: the watch is open and authenticated
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSession(s-revoked) as agent-a: Recv() = %v", err)
		}
	}
	if err := schemas(agentANew); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Schemas with a token not yet in token_file = %v, want Unauthenticated", err)
	}

	writeFile(t, tokens, tokenAgentANew+" agent-a\n"+tokenOperator+" operator\n")
	if _, err := e.app.ReloadFile(cfgPath); err != nil {
		t.Fatalf("ReloadFile() with agent-a's token replaced = %v", err)
	}
	if err := schemas(agentA); status.Code(err) != codes.Unauthenticated || reason(err) != "INVALID_TOKEN" {
		t.Errorf("Schemas with the token revoked by the reload = %v (reason %q), want Unauthenticated, INVALID_TOKEN", err, reason(err))
	}
	if err := schemas(agentANew); err != nil {
		t.Errorf("Schemas with the token the reload added = %v, want nil", err)
	}
	// The watch the revoked token opened runs on: it streams the operator's next step.
	operator.mustExecute(t, unknown("s-revoked", 1), batchOptions{})
	for range 2 {
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("the watch opened before the revocation: Recv() = %v, want the next step's events", err)
		}
	}

	writeFile(t, tokens, "short agent-a\n")
	if _, err := e.app.ReloadFile(cfgPath); err == nil {
		t.Fatal("ReloadFile() with a token file toolsd cannot read = nil, want it refused")
	}
	if err := schemas(agentANew); err != nil {
		t.Errorf("Schemas after a refused reload = %v, want the tokens in force to stay", err)
	}
	if err := schemas(agentA); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Schemas with the revoked token after a refused reload = %v, want Unauthenticated", err)
	}
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	if got := sample(t, body, `toolsd_config_reloads_total{result="failure"}`); got != 1 {
		t.Errorf("toolsd_config_reloads_total{result=\"failure\"} = %v, want 1", got)
	}
}

// TestReloadAppliesTheTLSFiles is what SIGHUP does after cert-manager renewed toolsd's
// certificate: a connection made after the reload is served the new certificate, while
// one open before keeps its handshake's and goes on working. A key file the reload
// cannot read (a renewal caught halfway) is refused whole: the reload counts as failed
// and new connections are still served the certificate in force.
func TestReloadAppliesTheTLSFiles(t *testing.T) {
	ca, err := devpki.NewCA("toolsd test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, tokens := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "tokens.txt")
	issue := func() *x509.Certificate {
		t.Helper()
		p, err := ca.IssueServer([]string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, certFile, string(p.CertPEM))
		writeFile(t, keyFile, string(p.KeyPEM))
		return p.Cert
	}
	first := issue()
	writeFile(t, tokens, tokenOperator+" operator\n")
	text := baseConfig + fmt.Sprintf(`
auth:
  tls: {cert_file: %s, key_file: %s}
  token_file: %s
  grants:
    - {identity: operator, role: operator}
`, certFile, keyFile, tokens)
	cfgPath := filepath.Join(dir, "toolsd.yaml")
	writeFile(t, cfgPath, text)
	cfg, err := config.Parse([]byte(text), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := runApp(t, cfg)
	connect := func() *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient("passthrough:///"+a.Addr(),
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})),
			grpc.WithPerRPCCredentials(bearer(tokenOperator)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	// served calls Schemas on conn and returns the serial of the certificate its
	// connection was served.
	served := func(conn *grpc.ClientConn) *big.Int {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var p peer.Peer
		if _, err := toolsdv1.NewToolServiceClient(conn).Schemas(ctx, &toolsdv1.SchemasRequest{}, grpc.Peer(&p)); err != nil {
			t.Fatalf("Schemas() = %v", err)
		}
		info, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.PeerCertificates) == 0 {
			t.Fatalf("Schemas() peer = %v, want a TLS connection", p.AuthInfo)
		}
		return info.State.PeerCertificates[0].SerialNumber
	}
	before := connect()
	if got := served(before); got.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("certificate served at start: serial %v, want %v", got, first.SerialNumber)
	}

	renewed := issue()
	if _, err := a.ReloadFile(cfgPath); err != nil {
		t.Fatalf("ReloadFile() with the certificate renewed = %v", err)
	}
	if got := served(connect()); got.Cmp(renewed.SerialNumber) != 0 {
		t.Errorf("certificate served to a connection made after the reload: serial %v, want the renewed %v", got, renewed.SerialNumber)
	}
	if got := served(before); got.Cmp(first.SerialNumber) != 0 {
		t.Errorf("the connection open before the reload: serial %v, want its handshake's %v", got, first.SerialNumber)
	}

	writeFile(t, keyFile, "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
	if _, err := a.ReloadFile(cfgPath); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Fatalf("ReloadFile() with a broken key file = %v, want it refused naming tls", err)
	}
	if got := served(connect()); got.Cmp(renewed.SerialNumber) != 0 {
		t.Errorf("certificate served after a refused reload: serial %v, want the one in force, %v", got, renewed.SerialNumber)
	}
}
