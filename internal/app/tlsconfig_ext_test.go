package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

// A tls section without cert_file is incomplete: toolsd would listen in plaintext and
// carry bearer tokens in clear (or, with client_ca_file, never see a certificate). The
// config refuses it, at its place in the file, before app.New would.
func TestIncompleteTLSIsRefused(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.txt")
	if err := os.WriteFile(tokens, []byte(tokenAgentA+" agent-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	some := filepath.Join(dir, "some.pem")
	if err := os.WriteFile(some, []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tls := range map[string]string{
		"key_file only":       "{key_file: " + some + "}",
		"client_ca_file only": "{client_ca_file: " + some + "}",
		"no cert_file":        "{key_file: " + some + ", client_ca_file: " + some + "}",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(baseConfig+`
auth:
  tls: `+tls+`
  token_file: `+tokens+`
  grants:
    - {identity: agent-a, role: agent, scopes: ["tenant-a/**"]}
`), "test.yaml")
			if err == nil {
				var a *app.App
				if a, err = app.New(cfg, app.WithLogger(zaptest.NewLogger(t))); err == nil {
					ctx, cancel := context.WithCancel(t.Context())
					cancel()
					_ = a.Run(ctx)
					t.Fatal("app.New() with an incomplete tls section succeeded (it would serve plaintext)")
				}
			}
			if !strings.Contains(err.Error(), "test.yaml:") || !strings.Contains(err.Error(), "auth.tls.cert_file") {
				t.Errorf("config.Parse(), app.New() = %v, want an error naming auth.tls.cert_file at its place", err)
			}
		})
	}
}
