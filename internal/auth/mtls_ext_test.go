package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/devpki"
)

type pki struct {
	ca                        *devpki.CA
	certFile, keyFile, caFile string
	spiffeClient, cnClient    tls.Certificate
	twoSPIFFE, foreign        tls.Certificate
	twoCN                     tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := devpki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pki{ca: ca, certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem"), caFile: filepath.Join(dir, "ca.pem")}
	for file, data := range map[string][]byte{p.certFile: server.CertPEM, p.keyFile: server.KeyPEM, p.caFile: ca.CertPEM} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client := func(ca *devpki.CA, cn string, uris ...string) tls.Certificate {
		pair, err := ca.IssueClient(cn, uris, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pair.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	p.spiffeClient = client(ca, "agent-cn-ignored", "https://example.test/not-spiffe", "spiffe://toolsd.test/agent-a")
	p.cnClient = client(ca, "agent-b")
	p.twoSPIFFE = client(ca, "x", "spiffe://toolsd.test/a", "spiffe://toolsd.test/b")
	other, err := devpki.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.foreign = client(other, "agent-a")
	p.twoCN = twoCNClient(t, ca, "agent-a", "operator")
	return p
}

// twoCNClient issues a client certificate whose subject carries a CN attribute for each
// of names, in order (Go's parser keeps the last one as CommonName).
func twoCNClient(t *testing.T, ca *devpki.CA, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var subject pkix.Name
	for _, n := range names {
		subject.ExtraNames = append(subject.ExtraNames, pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: n})
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *pki) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.ca.Pool(), Certificates: certs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func TestMTLS(t *testing.T) {
	p := newPKI(t)
	tokens := writeFile(t, "tokens", []byte(tokenA+" token-agent\n"))
	serverTLS, err := auth.ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatalf("ServerTLSConfig() = %v", err)
	}
	a, _ := mustNew(t, auth.Config{MTLS: true, TokenFile: tokens, Grants: []auth.Grant{{Identity: "*", Role: auth.RoleOperator}}})
	addr := startServer(t, a, serverTLS)

	tests := map[string]struct {
		client   *tls.Config
		authz    []string
		want     string
		wantCode codes.Code
		reason   string
	}{
		"URI SAN wins over CN": {client: p.clientTLS(p.spiffeClient), want: "mtls:spiffe://toolsd.test/agent-a"},
		"CN without URI SAN":   {client: p.clientTLS(p.cnClient), want: "mtls:agent-b"},
		"token wins over cert": {client: p.clientTLS(p.cnClient), authz: []string{"Bearer " + tokenA}, want: "token:token-agent"},
		"bad token with cert":  {client: p.clientTLS(p.cnClient), authz: []string{"Bearer wrong-token-0123456789abcdef"}, wantCode: codes.Unauthenticated, reason: auth.ReasonInvalidToken},
		"two SPIFFE IDs":       {client: p.clientTLS(p.twoSPIFFE), wantCode: codes.Unauthenticated, reason: auth.ReasonInvalidCertificate},
		"two CNs":              {client: p.clientTLS(p.twoCN), wantCode: codes.Unauthenticated, reason: auth.ReasonInvalidCertificate},
		// TLS 1.3 clients finish their side of the handshake before the server checks
		// their certificate, so the refusal surfaces as Unavailable on the first RPC.
		"no client cert":     {client: p.clientTLS(), wantCode: codes.Unavailable},
		"cert of another CA": {client: p.clientTLS(p.foreign), wantCode: codes.Unavailable},
		"TLS 1.1 client":     {client: &tls.Config{RootCAs: p.ca.Pool(), Certificates: []tls.Certificate{p.cnClient}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, wantCode: codes.Unavailable}, //nolint:gosec // an outdated client on purpose
		"plaintext client":   {client: nil, wantCode: codes.Unavailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			conn := dial(t, addr, tc.client)
			for rpc, call := range map[string]func() (string, error){
				"unary":  func() (string, error) { return callUnary(testContext(t), conn, tc.authz...) },
				"stream": func() (string, error) { return callStream(testContext(t), conn, tc.authz...) },
			} {
				got, err := call()
				if tc.wantCode == codes.OK {
					if err != nil || got != tc.want {
						t.Errorf("%s WhoAmI() = %q, %v, want %q", rpc, got, err, tc.want)
					}
					continue
				}
				if code, reason := errReason(err); code != tc.wantCode || reason != tc.reason {
					t.Errorf("%s WhoAmI() = %q, %v (%s), want %v %s", rpc, got, err, reason, tc.wantCode, tc.reason)
				}
			}
		})
	}
}

func TestServerTLSConfig(t *testing.T) {
	p := newPKI(t)
	cfg, err := auth.ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatalf("ServerTLSConfig() = %v", err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Errorf("ServerTLSConfig() = min %x, client auth %v, want TLS 1.2 minimum and required client certificates", cfg.MinVersion, cfg.ClientAuth)
	}
	cfg, err = auth.ServerTLSConfig(p.certFile, p.keyFile, "")
	if err != nil || cfg.ClientAuth != tls.NoClientCert {
		t.Errorf("ServerTLSConfig(no client CA) = %v, client auth %v, want no client certificates", err, cfg.ClientAuth)
	}
	for name, args := range map[string][3]string{
		"no key":         {p.certFile, "", ""},
		"missing cert":   {"/nonexistent.pem", p.keyFile, ""},
		"CA is not PEM":  {p.certFile, p.keyFile, p.keyFile + ".nope"},
		"CA holds a key": {p.certFile, p.keyFile, p.keyFile},
	} {
		if _, err := auth.ServerTLSConfig(args[0], args[1], args[2]); !errors.Is(err, auth.ErrInvalidConfig) {
			t.Errorf("ServerTLSConfig(%s) = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestMTLSNegotiatesTLS13 checks the preference for TLS 1.3 with a default client.
func TestMTLSNegotiatesTLS13(t *testing.T) {
	p := newPKI(t)
	serverTLS, err := auth.ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), p.clientTLS(p.cnClient))
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("negotiated TLS version = %x, want %x", v, tls.VersionTLS13)
	}
	_ = c.Close()
	if err := <-done; err != nil {
		t.Errorf("server handshake = %v", err)
	}
}

// A client certificate that expires while its connection stays open stops
// authenticating calls on that connection: the handshake checked it only once. A
// bearer token decides the identity on such a connection but does not stand in for the
// certificate: with client_ca_file set every connection needs one, and a new
// connection with the expired certificate fails its handshake whatever token its calls
// would carry.
func TestExpiredCertificateOnAnOpenConnection(t *testing.T) {
	p := newPKI(t)
	tokens := writeFile(t, "tokens", []byte(tokenA+" token-agent\n"))
	serverTLS, err := auth.ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatalf("ServerTLSConfig() = %v", err)
	}
	for name, tc := range map[string]struct {
		authz []string // the calls' authorization header, if any
		who   string   // the identity before expiry
	}{
		"certificate":  {nil, "mtls:agent-b"},
		"bearer token": {[]string{"Bearer " + tokenA}, "token:token-agent"},
	} {
		t.Run(name, func(t *testing.T) {
			var now atomic.Pointer[time.Time]
			start := time.Now()
			now.Store(&start)
			a, _ := mustNew(t, auth.Config{MTLS: true, TokenFile: tokens, Grants: []auth.Grant{{Identity: "*", Role: auth.RoleOperator}}},
				auth.WithClock(func() time.Time { return *now.Load() }))
			conn := dial(t, startServer(t, a, serverTLS), p.clientTLS(p.cnClient))
			if got, err := callUnary(testContext(t), conn, tc.authz...); err != nil || got != tc.who {
				t.Fatalf("WhoAmI() before expiry = %q, %v; want %q", got, err, tc.who)
			}
			later := start.Add(2 * time.Hour) // the certificate is valid for one
			now.Store(&later)
			for rpc, call := range map[string]func() (string, error){
				"unary":  func() (string, error) { return callUnary(testContext(t), conn, tc.authz...) },
				"stream": func() (string, error) { return callStream(testContext(t), conn, tc.authz...) },
			} {
				got, err := call()
				if code, reason := errReason(err); code != codes.Unauthenticated || reason != auth.ReasonCertificateExpired {
					t.Errorf("%s WhoAmI() after the certificate expired = %q, %v (%s), want Unauthenticated %s", rpc, got, err, reason, auth.ReasonCertificateExpired)
				}
			}
		})
	}
}
