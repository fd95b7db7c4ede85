// Package securetoolsd runs, for the examples' tests, an in-process toolsd on loopback
// that serves TLS and authenticates its clients as README's Security section sets it
// up, with credentials made for the test (or, for comparison, the quick start's
// plaintext toolsd), and gives the command-line flags (package dialflags) with which an
// example reaches it as a given identity.
package securetoolsd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/toolsd/toolsd/examples/internal/dialflags"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/devpki"
	"github.com/toolsd/toolsd/pkg/provider"
)

// Identities the toolsd grants, each a role of the same name: the provider's in the
// global scope, the agent's in [Scope], the hook's everywhere.
const (
	Agent    = "agent"
	Provider = "provider"
	Hook     = "hook"
)

// Mode is how the toolsd authenticates its clients.
type Mode string

const (
	// Plaintext is the quick start's toolsd: no TLS, no auth, and no connection flags.
	Plaintext Mode = "plaintext"
	// Tokens is TLS without client certificates, and bearer tokens: the agent's a JWT
	// (given with -token-file), the provider's a static token in a file (-token-file),
	// the hook's the same given on the command line (-token). The server's certificate
	// names 127.0.0.1.
	Tokens Mode = "tokens"
	// ClientCerts is mTLS: every client presents a certificate (-cert, -key), whose CN
	// is its identity. The server's certificate names only ServerName, so the flags
	// carry -server-name.
	ClientCerts Mode = "client certificates"
)

// Modes are the ways the examples are tested against.
var Modes = []Mode{Plaintext, Tokens, ClientCerts}

// Scope is the agent's: a tenant's, where it sees the tools the provider registers in
// the global scope. [Toolsd.Args] gives it to the agent with -scope.
const Scope = "tenant-a"

// ServerName is the only name on the server's certificate in [ClientCerts] mode.
const ServerName = "toolsd.test"

// Toolsd is a running toolsd and the credentials of its identities.
type Toolsd struct {
	Addr string
	mode Mode
	dir  string
	// hookToken is the hook's static token, given on the command line.
	hookToken string
}

// Start runs a toolsd in mode until the test's end; extra is YAML appended to its
// config (a hooks section, say).
func Start(t *testing.T, mode Mode, extra string) *Toolsd {
	t.Helper()
	s := &Toolsd{mode: mode, dir: t.TempDir()}
	ca, err := devpki.NewCA("examples test CA", time.Hour)
	check(t, err)
	s.write(t, "ca.pem", ca.CertPEM)
	host := "127.0.0.1"
	if mode == ClientCerts {
		host = ServerName
	}
	server, err := ca.IssueServer([]string{host}, time.Hour)
	check(t, err)
	s.write(t, "server.pem", server.CertPEM)
	s.write(t, "server-key.pem", server.KeyPEM)

	var auth string
	switch mode {
	case Plaintext:
	case ClientCerts:
		for _, id := range []string{Agent, Provider, Hook} {
			pair, err := ca.IssueClient(id, nil, time.Hour)
			check(t, err)
			s.write(t, id+".pem", pair.CertPEM)
			s.write(t, id+"-key.pem", pair.KeyPEM)
		}
		auth = fmt.Sprintf("  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\n",
			s.path("server.pem"), s.path("server-key.pem"), s.path("ca.pem"))
	case Tokens:
		s.hookToken = "hook-token-3c9e1f7a05d2b864"
		s.write(t, "provider.token", []byte("provider-token-8a4d2e6f91c07b35\n"))
		s.write(t, "tokens.txt", []byte("provider-token-8a4d2e6f91c07b35 provider\n"+s.hookToken+" hook\n"))
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		check(t, err)
		jwk, err := devpki.JWK("test-es256", "ES256", &key.PublicKey)
		check(t, err)
		jwks, err := devpki.JWKS(jwk)
		check(t, err)
		s.write(t, "jwks.json", jwks)
		jwt, err := devpki.SignJWT(key, "ES256", "test-es256", map[string]any{
			"sub": Agent, "iss": "toolsd-test", "aud": "toolsd", "exp": time.Now().Add(time.Hour).Unix(),
		})
		check(t, err)
		s.write(t, "agent.jwt", []byte(jwt+"\n"))
		auth = fmt.Sprintf("  tls: {cert_file: %s, key_file: %s}\n  token_file: %s\n  jwks_file: %s\n  jwt: {issuer: toolsd-test, audience: toolsd}\n",
			s.path("server.pem"), s.path("server-key.pem"), s.path("tokens.txt"), s.path("jwks.json"))
	default:
		t.Fatalf("securetoolsd: unknown mode %q", mode)
	}
	yml := `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
session: {store: memory}
`
	if auth != "" {
		yml += "auth:\n" + auth + `  grants:
    - {identity: agent, role: agent, scopes: ["` + Scope + `/**"]}
    - {identity: provider, role: provider, scopes: [""]}
    - {identity: hook, role: hook, scopes: ["**"]}
`
	}
	yml += extra
	cfg, err := config.Parse([]byte(yml), "securetoolsd.yaml")
	check(t, err)
	a, err := app.New(cfg, app.WithLogger(zaptest.NewLogger(t)))
	check(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("App.Run() = %v", err)
		}
	})
	s.Addr = a.Addr()
	return s
}

// Args are the flags with which an example reaches the toolsd as identity id,
// -addr included, and for the agent -scope.
func (s *Toolsd) Args(id string) []string {
	args := []string{"-addr", s.Addr}
	if id == Agent {
		args = append(args, "-scope", Scope)
	}
	if s.mode == Plaintext {
		return args
	}
	args = append(args, "-ca", s.path("ca.pem"))
	switch {
	case s.mode == ClientCerts:
		return append(args, "-server-name", ServerName, "-cert", s.path(id+".pem"), "-key", s.path(id+"-key.pem"))
	case id == Agent:
		return append(args, "-token-file", s.path("agent.jwt"))
	case id == Hook:
		return append(args, "-token", s.hookToken)
	default:
		return append(args, "-token-file", s.path(id+".token"))
	}
}

// DialOptions are the dial options of [Toolsd.Args] for identity id, for the test's
// own clients.
func (s *Toolsd) DialOptions(t *testing.T, id string) []grpc.DialOption {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.String("addr", "", "")
	fs.String("scope", "", "")
	f := dialflags.Register(fs)
	check(t, fs.Parse(s.Args(id)))
	opts, err := f.DialOptions()
	check(t, err)
	return opts
}

// Dial is a client connection to the toolsd as identity id, closed at the test's end.
func (s *Toolsd) Dial(t *testing.T, id string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr, s.DialOptions(t, id)...)
	check(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// RunProvider serves tools as the provider identity until the test's end, and returns
// once they are registered.
func (s *Toolsd) RunProvider(t *testing.T, tools ...provider.Tool) {
	t.Helper()
	p := provider.New("test-provider", provider.WithLogger(zaptest.NewLogger(t)),
		provider.WithDialOptions(s.DialOptions(t, Provider)...))
	p.Add(tools...)
	r := Background(t, "Provider.Run()", func(ctx context.Context) error { return p.Run(ctx, s.Addr) })
	select {
	case <-p.Ready():
	case <-r.Done():
		t.Fatalf("Provider.Run() = %v before its tools were registered", r.Err())
	case <-time.After(30 * time.Second):
		t.Fatal("the provider's tools were not registered within 30s")
	}
}

// Running is a function [Background] runs.
type Running struct {
	done chan struct{}
	err  error
}

// Background runs run until the test's end, when its context is cancelled, it is
// waited for, and an error it returned is reported as what's.
func Background(t *testing.T, what string, run func(context.Context) error) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if r.err != nil {
			t.Errorf("%s = %v", what, r.err)
		}
	})
	return r
}

// Done is closed once the function has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is the function's error, once Done is closed.
func (r *Running) Err() error { return r.err }

func (s *Toolsd) path(name string) string { return filepath.Join(s.dir, name) }

func (s *Toolsd) write(t *testing.T, name string, data []byte) {
	t.Helper()
	check(t, os.WriteFile(s.path(name), data, 0o600))
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
