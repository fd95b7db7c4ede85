package devpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// Pair is an issued certificate with its private key.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// TLS returns the pair as a tls.Certificate.
func (p *Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// NewCA makes a self-signed P-256 CA valid for validFor from now (backdated a minute).
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(commonName, validFor)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// KeyPEM returns the CA's private key in PKCS #8 PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.Key) }

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer issues a server certificate for hosts (IP addresses or DNS names).
func (ca *CA) IssueServer(hosts []string, validFor time.Duration) (*Pair, error) {
	tmpl := template(hosts[0], validFor)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// IssueClient issues a client certificate with subject CN commonName and the given URI
// SANs (for example "spiffe://toolsd.dev/agent-a"); either may be empty.
func (ca *CA) IssueClient(commonName string, uris []string, validFor time.Duration) (*Pair, error) {
	tmpl := template(commonName, validFor)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("devpki: uri %q: %w", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.issue(tmpl)
}

func (ca *CA) issue(tmpl *x509.Certificate) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Pair{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: kp}, nil
}

func template(commonName string, validFor time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"toolsd development"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
	}
}

func keyPEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
