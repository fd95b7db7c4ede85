package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// ServerTLSConfig returns the listener's TLS configuration: TLS 1.2 at least (Go
// negotiates 1.3 whenever the client offers it). With clientCAFile set, every client
// must present a certificate that chains to one of its CAs, checked during the
// handshake, so a client without one never reaches an RPC.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, configError("tls: cert_file and key_file are both required")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, configError("tls: %v", err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, configError("tls: client CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, configError("tls: client CA %s holds no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ServerTLS is the listener's TLS: its certificate and the CAs it verifies client
// certificates against, which [ServerTLS.ReplaceFiles] swaps for those of a reload.
// Each handshake takes the ones in force as it begins, so a rotated certificate is
// served to the next connection; a connection keeps what its handshake used.
type ServerTLS struct {
	mtls bool
	cur  atomic.Pointer[tls.Config]
}

// NewServerTLS reads the certificate, key and client CA files as [ServerTLSConfig]
// does.
func NewServerTLS(certFile, keyFile, clientCAFile string) (*ServerTLS, error) {
	cfg, err := ServerTLSConfig(certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, err
	}
	s := &ServerTLS{mtls: clientCAFile != ""}
	s.cur.Store(cfg)
	return s, nil
}

// Config returns the listener's TLS configuration: each handshake is served by the
// configuration in force when it begins (one atomic load per handshake).
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
}

// ReplaceFiles puts next's certificate and client CAs in force for the handshakes that
// begin from now on. Whether client certificates are required is s's for good: a next
// that differs is refused, and s keeps its files.
func (s *ServerTLS) ReplaceFiles(next *ServerTLS) error {
	if next.mtls != s.mtls {
		return configError("tls: requiring client certificates or not takes a restart")
	}
	s.cur.Store(next.cur.Load())
	return nil
}

// peerCertIdentity returns the identity of a verified client certificate, expiring when
// the certificate does (see [chainsExpiry]), or ok=false when the connection has none
// (plaintext, or TLS without client verification).
func peerCertIdentity(ctx context.Context) (id Identity, ok bool, err error) {
	p, found := peer.FromContext(ctx)
	if !found || p.AuthInfo == nil {
		return Identity{}, false, nil
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return Identity{}, false, nil
	}
	name, err := certIdentity(info.State.PeerCertificates[0])
	if err != nil {
		return Identity{}, false, err
	}
	return Identity{Name: name, Method: MethodMTLS, Expires: chainsExpiry(info.State.VerifiedChains)}, true, nil
}

// peerCertExpiry is when the connection's verified client certificate expires (see
// [chainsExpiry]), zero when the connection has none.
func peerCertExpiry(ctx context.Context) time.Time {
	p, found := peer.FromContext(ctx)
	if !found || p.AuthInfo == nil {
		return time.Time{}
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS {
		return time.Time{}
	}
	return chainsExpiry(info.State.VerifiedChains)
}

// chainsExpiry is when a handshake would no longer verify the client's certificate:
// the latest, over the chains that verified it, of the earliest NotAfter in each (its
// leaf's, unless an issuer of that chain expires first).
func chainsExpiry(chains [][]*x509.Certificate) time.Time {
	var latest time.Time
	for _, chain := range chains {
		var first time.Time
		for _, c := range chain {
			if first.IsZero() || c.NotAfter.Before(first) {
				first = c.NotAfter
			}
		}
		if first.After(latest) {
			latest = first
		}
	}
	return latest
}

// certIdentity is the certificate's SPIFFE ID (its spiffe:// URI SAN) if it has one,
// else its subject CN. A certificate with two SPIFFE IDs is refused (the SPIFFE X.509
// profile allows exactly one), and so is one without a SPIFFE ID whose subject has two
// CNs.
func certIdentity(c *x509.Certificate) (string, error) {
	var spiffe string
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		if spiffe != "" {
			return "", &CredentialError{Reason: ReasonInvalidCertificate, Detail: "client certificate carries more than one SPIFFE ID"}
		}
		spiffe = u.String()
	}
	name := spiffe
	if name == "" {
		if commonNames(c) > 1 {
			// Go keeps the last CN, other software the first: the certificate names no
			// one identity, whichever one its CA checked.
			return "", &CredentialError{Reason: ReasonInvalidCertificate, Detail: "client certificate carries more than one CN and no SPIFFE ID"}
		}
		name = c.Subject.CommonName
	}
	if name == "" {
		return "", &CredentialError{Reason: ReasonInvalidCertificate, Detail: "client certificate has neither a spiffe:// URI SAN nor a CN"}
	}
	if err := checkIdentityName(name); err != nil {
		return "", &CredentialError{Reason: ReasonInvalidCertificate, Detail: fmt.Sprintf("client certificate: %v", err)}
	}
	return name, nil
}

// oidCommonName is the X.520 commonName attribute type.
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// commonNames counts the CN attributes of c's subject.
func commonNames(c *x509.Certificate) int {
	n := 0
	for _, a := range c.Subject.Names {
		if a.Type.Equal(oidCommonName) {
			n++
		}
	}
	return n
}
