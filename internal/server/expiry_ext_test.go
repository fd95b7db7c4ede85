package server_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
)

// tokenNow is the time the test's authenticator checks tokens at.
var tokenNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// jwtSigner signs EdDSA JWTs that the JWKS file at jwks accepts.
type jwtSigner struct {
	key  ed25519.PrivateKey
	jwks string
}

func newJWTSigner(t *testing.T) *jwtSigner {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]any{"keys": []any{map[string]any{
		"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "use": "sig", "x": base64.RawURLEncoding.EncodeToString(pub),
	}}}
	return &jwtSigner{key: key, jwks: writeJSON(t, "jwks.json", set)}
}

// sign returns a token for sub that expires at exp.
func (s *jwtSigner) sign(t *testing.T, sub string, exp time.Time) string {
	t.Helper()
	seg := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := seg(map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}) + "." +
		seg(map[string]any{"sub": sub, "aud": "toolsd", "iat": tokenNow.Unix(), "exp": exp.Unix()})
	return signed + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.key, []byte(signed)))
}

func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// expiryTimers stands in for the timers that end streams at their token's expiry:
// armed reports each timer's time and its function, which the test calls when it
// decides the time has come.
type expiryTimers struct{ armed chan armedTimer }

type armedTimer struct {
	at   time.Time
	fire func()
}

// armedAfter receives events 1 to n of w, the watch opened with the credential what
// names, and then the expiry timer it armed.
func (e expiryTimers) armedAfter(t *testing.T, w toolsdv1.ToolService_WatchSessionClient, n uint64, what string) armedTimer {
	t.Helper()
	for seq := uint64(1); seq <= n; seq++ {
		if m, err := w.Recv(); err != nil || m.GetEvent().GetSeq() != seq {
			t.Fatalf("Recv() = %v, %v; want event %d", m.GetEvent().GetSeq(), err, seq)
		}
	}
	select {
	case timer := <-e.armed:
		return timer
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch opened with %s armed no expiry timer", what)
		return armedTimer{}
	}
}

func (e expiryTimers) after(at time.Time, f func()) (stop func() bool) {
	e.armed <- armedTimer{at: at, fire: f}
	return func() bool { return true }
}

// TestWatchEndsWhenItsTokenExpires: a stream is authenticated once, as it opens, and
// a WatchSession opened with a JWT went on sending the session's events after the
// token expired, for as long as the client kept it open. It now ends once the token is
// no longer accepted (its exp plus the leeway) with Unauthenticated (TOKEN_EXPIRED),
// as a new stream with that token would be refused, so that the client resumes with a
// fresh one. A static token does not expire, and its watch is not timed.
func TestWatchEndsWhenItsTokenExpires(t *testing.T) {
	jwt := newJWTSigner(t)
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	if err := os.WriteFile(tokens, []byte("static-token-of-agent-a agent-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authn, _, err := auth.New(auth.Config{JWKSFile: jwt.jwks, TokenFile: tokens, Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{"**"}}}},
		auth.WithClock(func() time.Time { return tokenNow }), auth.WithLeeway(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := session.NewMemory()
	defer func() { _ = store.Close() }()
	appendMessages(t, store, "s", 2)
	timers := expiryTimers{armed: make(chan armedTimer, 2)}
	tools, _, ends := serveConfig(t, server.GRPCConfig{AuthUnary: authn.UnaryServerInterceptor(), AuthStream: authn.StreamServerInterceptor()},
		server.Deps{Sessions: store, ExpiryTimer: timers.after})

	exp := tokenNow.Add(time.Hour)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+jwt.sign(t, "agent-a", exp))
	w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	timer := timers.armedAfter(t, w, 2, "a JWT")
	if want := exp.Add(30 * time.Second); !timer.at.Equal(want) {
		t.Errorf("expiry timer armed for %v, want %v (exp plus the leeway)", timer.at, want)
	}
	timer.fire()
	m, err := w.Recv()
	if status.Code(err) != codes.Unauthenticated || reason(err) != auth.ReasonTokenExpired {
		t.Fatalf("Recv() after the token expired = %v, %v; want Unauthenticated (%s)", m.GetEvent().GetSeq(), err, auth.ReasonTokenExpired)
	}
	<-ends // the watch's RPC ended; ends has room for the next one's

	ctx = metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer static-token-of-agent-a")
	w, err = tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetEvent().GetSeq() != 1 {
		t.Fatalf("Recv() with a static token = %v, %v; want event 1", m.GetEvent().GetSeq(), err)
	}
	select {
	case timer := <-timers.armed:
		t.Errorf("the watch opened with a static token armed an expiry timer for %v", timer.at)
	default:
	}
}

// testPKI is a throwaway CA with a server certificate for "toolsd.test", in files as
// auth.ServerTLSConfig reads them.
type testPKI struct {
	ca                        *x509.Certificate
	key                       *ecdsa.PrivateKey
	certFile, keyFile, caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key := newECKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(2 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, key: key}
	dir := t.TempDir()
	p.certFile, p.keyFile, p.caFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem")
	server := p.issue(t, "toolsd.test", now.Add(time.Hour), x509.ExtKeyUsageServerAuth)
	keyDER, err := x509.MarshalPKCS8PrivateKey(server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		p.certFile: {Type: "CERTIFICATE", Bytes: server.Certificate[0]},
		p.keyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
		p.caFile:   {Type: "CERTIFICATE", Bytes: der},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// issue returns a certificate for name (its CN and DNS SAN) valid until notAfter.
func (p *testPKI) issue(t *testing.T, name string, notAfter time.Time, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key := newECKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Minute), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestWatchEndsWhenItsCertificateExpires: a client certificate is checked only at the
// TLS handshake, and a WatchSession authenticated by one went on sending the session's
// events past the certificate's NotAfter, for as long as the client kept the stream
// (the watch of a JWT ends at its expiry). It now ends once the certificate expires,
// with Unauthenticated (CERTIFICATE_EXPIRED), naming the certificate. So does one
// opened with a static token (which never expires) on a connection with a client
// certificate: a token decides the identity there, and every RPC on the connection is
// refused once its certificate has expired; that watch went on for as long as the
// client kept it.
func TestWatchEndsWhenItsCertificateExpires(t *testing.T) {
	p := newTestPKI(t)
	notAfter := time.Now().Add(10 * time.Minute).Truncate(time.Second) // a certificate's times are whole seconds
	client := p.issue(t, "agent-a", notAfter, x509.ExtKeyUsageClientAuth)
	serverTLS, err := auth.ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	if err := os.WriteFile(tokens, []byte("static-token-of-agent-b agent-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authn, _, err := auth.New(auth.Config{MTLS: true, TokenFile: tokens, Grants: []auth.Grant{
		{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{"**"}},
		{Identity: "agent-b", Role: auth.RoleAgent, Scopes: []string{"**"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	store := session.NewMemory()
	defer func() { _ = store.Close() }()
	appendMessages(t, store, "s", 2)
	timers := expiryTimers{armed: make(chan armedTimer, 1)}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	tools, _, ends := serveConfigCreds(t,
		server.GRPCConfig{Creds: credentials.NewTLS(serverTLS), AuthUnary: authn.UnaryServerInterceptor(), AuthStream: authn.StreamServerInterceptor()},
		server.Deps{Sessions: store, ExpiryTimer: timers.after},
		credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, ServerName: "toolsd.test", MinVersion: tls.VersionTLS12}))

	for _, tc := range []struct{ name, authz string }{
		{"a client certificate", ""},
		{"a static token over a connection with a client certificate", "Bearer static-token-of-agent-b"},
	} {
		ctx := t.Context()
		if tc.authz != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.authz)
		}
		w, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s"})
		if err != nil {
			t.Fatal(err)
		}
		timer := timers.armedAfter(t, w, 2, tc.name)
		if !timer.at.Equal(notAfter) {
			t.Errorf("%s: expiry timer armed for %v, want the certificate's NotAfter %v", tc.name, timer.at, notAfter)
		}
		timer.fire()
		m, err := w.Recv()
		if status.Code(err) != codes.Unauthenticated || reason(err) != auth.ReasonCertificateExpired || !strings.Contains(status.Convert(err).Message(), "certificate") {
			t.Fatalf("%s: Recv() after the certificate expired = %v, %v; want Unauthenticated (%s) naming the certificate", tc.name, m.GetEvent().GetSeq(), err, auth.ReasonCertificateExpired)
		}
		<-ends // the watch's RPC ended; ends has room for the next one's
	}
}

// TestWatchSchemasEndsWhenItsTokenExpires: a WatchSchemas opened with a JWT ends as a
// WatchSession does once the token is no longer accepted (its exp plus the leeway), with
// Unauthenticated (TOKEN_EXPIRED), as the proto says, so that the loop opens it again
// with a fresh token.
func TestWatchSchemasEndsWhenItsTokenExpires(t *testing.T) {
	jwt := newJWTSigner(t)
	authn, _, err := auth.New(auth.Config{JWKSFile: jwt.jwks, Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{"**"}}}},
		auth.WithClock(func() time.Time { return tokenNow }), auth.WithLeeway(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := session.NewMemory()
	defer func() { _ = store.Close() }()
	timers := expiryTimers{armed: make(chan armedTimer, 1)}
	tools, _, _ := serveConfig(t, server.GRPCConfig{AuthUnary: authn.UnaryServerInterceptor(), AuthStream: authn.StreamServerInterceptor()},
		server.Deps{Sessions: store, Registry: registry.New(registry.WithLogger(zaptest.NewLogger(t))), ExpiryTimer: timers.after})

	exp := tokenNow.Add(time.Hour)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+jwt.sign(t, "agent-a", exp))
	w, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetFingerprint() == "" {
		t.Fatalf("WatchSchemas(team).Recv() = %v, %v; want the current fingerprint", m, err)
	}
	var timer armedTimer
	select {
	case timer = <-timers.armed:
	case <-time.After(10 * time.Second):
		t.Fatal("the schema watch opened with a JWT armed no expiry timer")
	}
	if want := exp.Add(30 * time.Second); !timer.at.Equal(want) {
		t.Errorf("expiry timer armed for %v, want %v (exp plus the leeway)", timer.at, want)
	}
	timer.fire()
	m, err := w.Recv()
	if status.Code(err) != codes.Unauthenticated || reason(err) != auth.ReasonTokenExpired {
		t.Fatalf("Recv() after the token expired = %v, %v; want Unauthenticated (%s)", m, err, auth.ReasonTokenExpired)
	}
}
