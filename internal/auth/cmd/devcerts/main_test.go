package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"

	"github.com/toolsd/toolsd/internal/auth"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDevcertsSetup follows the README: the files devcerts writes configure toolsd.
func TestDevcertsSetup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-certs")
	o := &options{dir: dir, hosts: "127.0.0.1,localhost", spiffe: "toolsd.dev", validFor: time.Hour, tokenTTL: time.Hour, issuer: "toolsd-dev", audience: "toolsd"}
	if err := run(o); err != nil {
		t.Fatalf("run() = %v", err)
	}
	file := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"ca-key.pem", "server-key.pem", "agent-a-key.pem", "tokens.txt", "jwt-signing-key.pem"} {
		fi, err := os.Stat(file(name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v, want 0600", name, fi.Mode().Perm(), err)
		}
	}

	if _, err := auth.ServerTLSConfig(file("server.pem"), file("server-key.pem"), file("ca.pem")); err != nil {
		t.Errorf("ServerTLSConfig(devcerts files) = %v", err)
	}
	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(file("ca.pem"))
	roots.AppendCertsFromPEM(caPEM)
	for _, name := range clients {
		c := parseCert(t, file(name+".pem"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s.pem does not verify as a client certificate: %v", name, err)
		}
		if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://toolsd.dev/"+name || c.Subject.CommonName != name {
			t.Errorf("%s.pem: URIs %v, CN %q, want spiffe://toolsd.dev/%s and CN %s", name, c.URIs, c.Subject.CommonName, name, name)
		}
	}
	if _, err := parseCert(t, file("server.pem")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("server.pem does not verify for 127.0.0.1: %v", err)
	}

	a, _, err := auth.New(auth.Config{
		MTLS: true, TokenFile: file("tokens.txt"), JWKSFile: file("jwks.json"), Issuer: "toolsd-dev", Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "operator", Role: auth.RoleOperator}},
	})
	if err != nil {
		t.Fatalf("New(devcerts files) = %v", err)
	}
	jwt, _ := os.ReadFile(file("agent-a.jwt"))
	tokens, _ := os.ReadFile(file("tokens.txt"))
	firstToken := strings.Fields(strings.Split(string(tokens), "\n")[1])[0]
	for kind, token := range map[string]string{"jwt": strings.TrimSpace(string(jwt)), "token": firstToken} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
		if id, err := a.Authenticate(ctx); err != nil || id.Name != "agent-a" || id.Method != kind {
			t.Errorf("Authenticate(devcerts %s) = %+v, %v, want agent-a by %s", kind, id, err, kind)
		}
	}

	if err := run(o); err == nil || !strings.Contains(err.Error(), "-force") {
		t.Errorf("run() over existing files = %v, want a refusal naming -force", err)
	}
	o.force = true
	if err := run(o); err != nil {
		t.Errorf("run(-force) = %v, want nil", err)
	}
}

func parseCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestForceKeepsSecretsPrivate: -force writes new keys and tokens over files that may
// have been left readable by others; the new secrets must not inherit that mode.
func TestForceKeepsSecretsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev-certs")
	o := &options{dir: dir, hosts: "127.0.0.1", validFor: time.Hour, tokenTTL: time.Hour, issuer: "toolsd-dev", audience: "toolsd"}
	if err := run(o); err != nil {
		t.Fatalf("run() = %v", err)
	}
	secrets := []string{"ca-key.pem", "server-key.pem", "agent-a-key.pem", "tokens.txt", "jwt-signing-key.pem", "agent-a.jwt"}
	for _, name := range secrets {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.force = true
	if err := run(o); err != nil {
		t.Fatalf("run(-force) = %v", err)
	}
	for _, name := range secrets {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s after -force over a 0644 file: mode %v, %v, want 0600", name, fi.Mode().Perm(), err)
		}
	}
}

// TestREADMESetupHasItsCredentials: every identity README's Security setup grants by
// name has a certificate and a token from devcerts, and every dev-certs file its config
// and commands name is one devcerts writes. The grants named policy-hook, for which
// devcerts wrote nothing, and the hook's command ran on the operator's certificate.
func TestREADMESetupHasItsCredentials(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dev-certs")
	o := &options{dir: dir, hosts: "127.0.0.1", validFor: time.Hour, tokenTTL: time.Hour, issuer: "toolsd-dev", audience: "toolsd"}
	if err := run(o); err != nil {
		t.Fatalf("run() = %v", err)
	}
	tokens, err := os.ReadFile(filepath.Join(dir, "tokens.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tokenOf := map[string]bool{}
	for _, line := range strings.Split(string(tokens), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			tokenOf[f[1]] = true
		}
	}
	granted := regexp.MustCompile(`\{identity: "?([^",*]+)"?,`).FindAllStringSubmatch(string(readme), -1)
	if len(granted) == 0 {
		t.Fatal("README names no granted identity: the setup's grants moved")
	}
	for _, m := range granted {
		id := m[1]
		if _, err := os.Stat(filepath.Join(dir, id+".pem")); err != nil {
			t.Errorf("README grants %s, which devcerts wrote no certificate for: %v", id, err)
		}
		if !tokenOf[id] {
			t.Errorf("README grants %s, which devcerts wrote no token for", id)
		}
	}
	if !strings.Contains(string(readme), "go run ./examples/hook -ca dev-certs/ca.pem -cert dev-certs/policy-hook.pem -key dev-certs/policy-hook-key.pem") {
		t.Error("README's command for the example hook does not run it as policy-hook, the identity its grants name")
	}
	named := regexp.MustCompile(`dev-certs/([\w.-]+)`).FindAllStringSubmatch(string(readme), -1)
	for _, m := range named {
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			t.Errorf("README names dev-certs/%s, which devcerts does not write: %v", m[1], err)
		}
	}
}

// TestSpiffeNotesTheGrants: with -spiffe a client certificate's identity is its
// spiffe:// ID, which README's grants (bare names such as agent-a) do not match; devcerts
// says so when it writes them, and says nothing of it without the flag.
func TestSpiffeNotesTheGrants(t *testing.T) {
	for domain, want := range map[string]string{
		"toolsd.dev": "grants must name spiffe://toolsd.dev/<name> (spiffe://toolsd.dev/agent-a, …)",
		"":           "",
	} {
		var out strings.Builder
		o := &options{dir: filepath.Join(t.TempDir(), "dev-certs"), hosts: "127.0.0.1", spiffe: domain, validFor: time.Hour,
			tokenTTL: time.Hour, issuer: "toolsd-dev", audience: "toolsd", out: &out}
		if err := run(o); err != nil {
			t.Fatalf("run(-spiffe %q) = %v", domain, err)
		}
		if got := strings.Contains(out.String(), "spiffe"); got != (want != "") || !strings.Contains(out.String(), want) {
			t.Errorf("run(-spiffe %q) wrote %q, want a note containing %q only with the flag", domain, out.String(), want)
		}
	}
}
