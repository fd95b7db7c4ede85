// Package dialflags gives the example programs the flags that reach a toolsd which
// serves TLS, requires client certificates (mTLS) or takes bearer tokens (static tokens
// or JWTs), as README's Security section sets it up, and turns them into gRPC dial
// options. Without any of them a program dials in plaintext, as the quick start's
// toolsd listens. It never sends a token over plaintext: toolsd would get it in clear.
package dialflags

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Flags are the connection flags of an example program.
type Flags struct {
	tls                       bool
	ca, cert, key, serverName string
	token, tokenFile          string
}

// Register defines the flags on fs.
func Register(fs *flag.FlagSet) *Flags {
	f := new(Flags)
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS, verifying toolsd's certificate against the system's roots (implied by -ca, -cert and -server-name)")
	fs.StringVar(&f.ca, "ca", "", "PEM file of the CA that signed toolsd's certificate (turns TLS on)")
	fs.StringVar(&f.cert, "cert", "", "PEM file of the client certificate, for a toolsd with auth.tls.client_ca_file (with -key)")
	fs.StringVar(&f.key, "key", "", "PEM file of the client certificate's private key (with -cert)")
	fs.StringVar(&f.serverName, "server-name", "", "name to verify toolsd's certificate against, when it is not the host of -addr")
	fs.StringVar(&f.token, "token", "", "bearer token (static token or JWT) sent with every RPC; needs TLS (prefer -token-file: a flag is visible in the process list)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token, read again for every RPC (so a renewed JWT is used on the next stream); needs TLS")
	return f
}

// Check reports a combination of the flags that cannot work; a program's flag parsing
// calls it, so the error is printed with the usage.
func (f *Flags) Check() error {
	switch {
	case (f.cert == "") != (f.key == ""):
		return errors.New("-cert and -key go together: give both or neither")
	case f.token != "" && f.tokenFile != "":
		return errors.New("-token and -token-file both give the bearer token: give one")
	case (f.token != "" || f.tokenFile != "") && !f.TLS():
		return errors.New("a bearer token needs TLS (-ca, or -tls for a certificate the system trusts): without it the token would cross the network in clear")
	}
	return nil
}

// TLS reports whether the flags ask for TLS.
func (f *Flags) TLS() bool { return f.tls || f.ca != "" || f.cert != "" || f.serverName != "" }

// DialOptions returns the transport credentials the flags ask for (plaintext without
// any) and, with a token, the per-RPC credentials that send it. It reads the
// certificate files; the token file is read for each RPC.
func (f *Flags) DialOptions() ([]grpc.DialOption, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if !f.TLS() {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", f.ca)
		}
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("-cert, -key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if f.token != "" || f.tokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: f.token, file: f.tokenFile}))
	}
	return opts, nil
}

// bearer sends a token in each RPC's authorization header, as toolsd reads it.
type bearer struct{ token, file string }

var _ credentials.PerRPCCredentials = bearer{}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok := b.token
	if b.file != "" {
		data, err := os.ReadFile(b.file)
		if err != nil {
			return nil, fmt.Errorf("-token-file: %w", err)
		}
		if tok = strings.TrimSpace(string(data)); tok == "" {
			return nil, fmt.Errorf("-token-file %s: empty", b.file)
		}
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity is true: gRPC refuses to send the token over plaintext.
func (bearer) RequireTransportSecurity() bool { return true }
