package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/metadata"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/config"
)

func TestDisabledAllowsEverything(t *testing.T) {
	a, z := mustNew(t, auth.Config{})
	if a.Enabled() || z.Enabled() {
		t.Fatalf("Enabled() = %v, %v, want false with no authentication configured", a.Enabled(), z.Enabled())
	}
	conn := dial(t, startServer(t, a, nil), nil)
	for name, authz := range map[string][]string{"no credentials": nil, "stray token": {"Bearer whatever"}} {
		if got, err := callUnary(testContext(t), conn, authz...); err != nil || got != "anonymous:anonymous" {
			t.Errorf("WhoAmI(%s) = %q, %v, want anonymous:anonymous", name, got, err)
		}
	}
	ctx := auth.NewContext(context.Background(), auth.Identity{Name: auth.Anonymous, Method: auth.MethodAnonymous})
	for _, action := range []auth.Action{auth.ReadTools, auth.Execute, auth.ReadSession, auth.Register, auth.Restrict, auth.Subscribe, auth.Admin} {
		if err := z.Authorize(ctx, action, "", "s"); err != nil {
			t.Errorf("Authorize(%v) = %v, want nil when auth is off", action, err)
		}
	}
	if err := z.ClaimSession("x", "s"); err != nil {
		t.Errorf("ClaimSession() = %v, want nil when auth is off", err)
	}
	if err := z.ClaimSession("y", "s"); err != nil {
		t.Errorf("ClaimSession(second identity) = %v, want nil when auth is off", err)
	}
}

func TestNewInvalid(t *testing.T) {
	op := []auth.Grant{{Identity: "op", Role: auth.RoleOperator}}
	tests := map[string]struct {
		cfg  auth.Config
		want string
	}{
		"grants without authn":  {cfg: auth.Config{Grants: op}, want: "need an authentication method"},
		"issuer without jwks":   {cfg: auth.Config{MTLS: true, Issuer: "x", Grants: op}, want: "need jwks_file"},
		"authn without grants":  {cfg: auth.Config{MTLS: true}, want: "no grants"},
		"unknown role":          {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a", Role: "admin"}}}, want: "unknown role"},
		"agent without scopes":  {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleAgent}}}, want: "needs scopes"},
		"empty identity":        {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Role: auth.RoleOperator}}}, want: "identity is empty"},
		"bad identity glob":     {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "agent-[", Role: auth.RoleOperator}}}, want: "identity glob"},
		"bad scope glob":        {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleAgent, Scopes: []string{"a/**/b"}}}}, want: "only allowed as the whole last segment"},
		"empty scope segment":   {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleAgent, Scopes: []string{"a//b"}}}}, want: "empty segment"},
		"missing jwks file":     {cfg: auth.Config{JWKSFile: "/nonexistent/jwks.json", Grants: op}, want: "jwks file"},
		"identity with a space": {cfg: auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a b", Role: auth.RoleOperator}}}, want: "white space"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := auth.New(tc.cfg)
			if !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%s) = %v, want ErrInvalidConfig mentioning %q", name, err, tc.want)
			}
		})
	}
}

func TestWarnIfExposed(t *testing.T) {
	tests := map[string]struct {
		addr          string
		authOn, tlsOn bool
		wantWarn      bool
	}{
		"ipv4 loopback":      {addr: "127.0.0.1:50151"},
		"ipv6 loopback":      {addr: "[::1]:50151"},
		"localhost":          {addr: "localhost:50151"},
		"all interfaces":     {addr: "0.0.0.0:50151", wantWarn: true},
		"empty host":         {addr: ":50151", wantWarn: true},
		"ipv6 any":           {addr: "[::]:50151", wantWarn: true},
		"private address":    {addr: "10.1.2.3:50151", wantWarn: true},
		"host name":          {addr: "toolsd.internal:50151", wantWarn: true},
		"exposed with auth":  {addr: "0.0.0.0:50151", authOn: true, tlsOn: true},
		"tokens in clear":    {addr: "0.0.0.0:50151", authOn: true, wantWarn: true},
		"loopback in clear":  {addr: "127.0.0.1:50151", authOn: true},
		"nil logger is safe": {addr: "0.0.0.0:1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			var log *zap.Logger
			if name != "nil logger is safe" {
				log = zap.New(core)
			}
			auth.WarnIfExposed(tc.addr, tc.authOn, tc.tlsOn, log)
			if got := logs.Len() > 0; got != tc.wantWarn {
				t.Errorf("WarnIfExposed(%q, auth %v, tls %v) warned = %v, want %v", tc.addr, tc.authOn, tc.tlsOn, got, tc.wantWarn)
			}
		})
	}
}

func TestWarnIfPprofExposed(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:9090": false, "localhost:9090": false, ":9090": true, "10.0.0.1:9090": true} {
		core, logs := observer.New(zapcore.WarnLevel)
		auth.WarnIfPprofExposed(addr, zap.New(core))
		if got := logs.Len() > 0; got != want {
			t.Errorf("WarnIfPprofExposed(%q) warned = %v, want %v", addr, got, want)
		}
	}
}

func TestStripCredentials(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer secret", "x-request-id", "r1"))
	ctx = metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer secret"))
	ctx = auth.StripCredentials(ctx)
	in, _ := metadata.FromIncomingContext(ctx)
	out, _ := metadata.FromOutgoingContext(ctx)
	if len(in.Get("authorization")) != 0 || len(out.Get("authorization")) != 0 {
		t.Errorf("StripCredentials() kept authorization: in %v, out %v", in, out)
	}
	if got := in.Get("x-request-id"); len(got) != 1 || got[0] != "r1" {
		t.Errorf("StripCredentials() incoming x-request-id = %v, want [r1]", got)
	}
}

func TestAuthFailuresAreLoggedWithoutTheToken(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	file := writeFile(t, "tokens", []byte(tokenA+" agent-a\n"))
	a, _ := mustNew(t, auth.Config{TokenFile: file, Grants: []auth.Grant{{Identity: "*", Role: auth.RoleOperator}}}, auth.WithLogger(zap.New(core)))
	conn := dial(t, startServer(t, a, nil), nil)
	const wrong = "wrong-token-that-must-not-be-logged"
	if _, err := callUnary(testContext(t), conn, "Bearer "+wrong); err == nil {
		t.Fatal("WhoAmI(wrong token) = nil error, want Unauthenticated")
	}
	entries := logs.FilterMessage("authentication failed").All()
	if len(entries) != 1 {
		t.Fatalf("logged %d authentication failures, want 1", len(entries))
	}
	for k, v := range entries[0].ContextMap() {
		if s, ok := v.(string); ok && strings.Contains(s, wrong) {
			t.Errorf("log field %s = %q contains the token", k, s)
		}
	}
}

// TestExampleFiles keeps testdata/ (shown in the README) loadable and consistent.
func TestExampleFiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "config.example.yaml")
	if err != nil {
		t.Fatalf("config.Parse(config.example.yaml) = %v", err)
	}
	ac := auth.FromConfig(cfg)
	if !ac.MTLS || ac.Issuer != "toolsd-dev" || ac.Audience != "toolsd" || len(ac.Grants) != 5 {
		t.Errorf("FromConfig(example) = %+v, want mTLS, issuer, audience and 5 grants", ac)
	}
	for _, tokens := range []string{"tokens.example.txt", "tokens.example.yaml"} {
		ac.TokenFile = filepath.Join("testdata", tokens)
		ac.JWKSFile = filepath.Join("testdata", "jwks.example.json")
		a, z, err := auth.New(ac)
		if err != nil {
			t.Fatalf("New(example config, %s) = %v", tokens, err)
		}
		for token, want := range map[string]string{
			"EXAMPLE-agent-a-0c6f1d8e2b7a4f9e":    "agent-a",
			"EXAMPLE-provider-a-5d1e7c94b2f08a63": "provider-a",
		} {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
			id, err := a.Authenticate(ctx)
			if err != nil || id.Name != want {
				t.Errorf("%s: Authenticate(example token) = %+v, %v, want %s", tokens, id, err, want)
			}
		}
		if err := z.AllowRegister(asIdentity("provider-a"), "tenant-a/bot"); err != nil {
			t.Errorf("example grants: AllowRegister(provider-a, tenant-a/bot) = %v, want nil", err)
		}
		if err := z.AllowRegister(asIdentity("provider-a"), ""); err == nil {
			t.Errorf("example grants: AllowRegister(provider-a, global) = nil, want denied")
		}
	}
}

// TestGrantErrorsSayWhere: a grant of the config file that New refuses is named by its
// place in the file and its path in the config.
func TestGrantErrorsSayWhere(t *testing.T) {
	for want, grants := range map[string]string{
		"t.yaml:6:7: auth.grants[1]: role agent needs scopes":                                     "    - {identity: op, role: operator}\n    - {identity: a, role: agent}\n",
		`t.yaml:7:7: auth.grants[1]: identity "a b" contains white space`:                         "    - identity: op\n      role: operator\n    - role: operator\n      identity: a b\n",
		`t.yaml:5:7: auth.grants[0]: scope glob "a/**/b": "**" is only allowed as the whole last`: "    - {identity: a, role: hook, scopes: [\"a/**/b\"]}\n",
	} {
		cfg, err := config.Parse([]byte("data_dir: d\nauth:\n  tls: {cert_file: s.pem, key_file: k.pem, client_ca_file: ca.pem}\n  grants:\n"+grants), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := auth.New(auth.FromConfig(cfg)); !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(grants %q) = %v, want ErrInvalidConfig mentioning %q", grants, err, want)
		}
	}
	// A grant not from a file is named by its index alone.
	_, _, err := auth.New(auth.Config{MTLS: true, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleAgent}}})
	if want := "auth: invalid configuration: grants[0]: role agent needs scopes"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New(agent without scopes) = %v, want %q", err, want)
	}
}
