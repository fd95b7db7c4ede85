// Command devcerts writes development credentials for toolsd's auth setup: a CA, a
// server certificate, client certificates for agent-a, provider-a, policy-hook and
// operator, a random static token for each, and an ES256 JWT signing key with its public
// JWKS and a sample token (agent-a's).
// Everything it writes is for development only.
//
//	go run ./internal/auth/cmd/devcerts -dir ./dev-certs
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolsd/toolsd/internal/devpki"
)

// clients are the identities README's Security setup grants by name: an agent, a
// provider and a hook of tenant-a, and an operator.
var clients = []string{"agent-a", "provider-a", "policy-hook", "operator"}

type options struct {
	dir      string
	hosts    string
	spiffe   string
	validFor time.Duration
	tokenTTL time.Duration
	issuer   string
	audience string
	force    bool
	out      io.Writer // what it reports; nil is standard output
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "dev-certs", "directory to write into (created)")
	flag.StringVar(&o.hosts, "hosts", "127.0.0.1,localhost", "comma-separated server names and IPs")
	flag.StringVar(&o.spiffe, "spiffe", "", "trust domain; when set, client certificates carry spiffe://<domain>/<name> URI SANs, "+
		"their identities, so grants must name spiffe://<domain>/<name>, not <name> (tokens keep the bare names)")
	flag.DurationVar(&o.validFor, "valid", 365*24*time.Hour, "certificate lifetime")
	flag.DurationVar(&o.tokenTTL, "token-ttl", 24*time.Hour, "lifetime of the sample JWT")
	flag.StringVar(&o.issuer, "issuer", "toolsd-dev", "iss of the sample JWT")
	flag.StringVar(&o.audience, "audience", "toolsd", "aud of the sample JWT")
	flag.BoolVar(&o.force, "force", false, "overwrite existing files")
	flag.Parse()
	if err := run(&o); err != nil {
		fmt.Fprintln(os.Stderr, "devcerts:", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	ca, err := devpki.NewCA("toolsd development CA", o.validFor)
	if err != nil {
		return err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	if err := o.write("ca.pem", ca.CertPEM, 0o644); err != nil {
		return err
	}
	if err := o.write("ca-key.pem", caKey, 0o600); err != nil {
		return err
	}
	server, err := ca.IssueServer(strings.Split(o.hosts, ","), o.validFor)
	if err != nil {
		return err
	}
	if err := o.writePair("server", server); err != nil {
		return err
	}
	var tokens strings.Builder
	tokens.WriteString("# <token> <identity>; development tokens written by devcerts\n")
	for _, name := range clients {
		var uris []string
		if o.spiffe != "" {
			uris = []string{"spiffe://" + o.spiffe + "/" + name}
		}
		pair, err := ca.IssueClient(name, uris, o.validFor)
		if err != nil {
			return err
		}
		if err := o.writePair(name, pair); err != nil {
			return err
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		fmt.Fprintf(&tokens, "%s %s\n", hex.EncodeToString(secret), name)
	}
	if err := o.write("tokens.txt", []byte(tokens.String()), 0o600); err != nil {
		return err
	}
	if err := o.writeJWT(); err != nil {
		return err
	}
	out := o.out
	if out == nil {
		out = os.Stdout
	}
	if _, err := fmt.Fprintf(out, "wrote development credentials to %s\n", o.dir); err != nil || o.spiffe == "" {
		return err
	}
	id := "spiffe://" + o.spiffe + "/"
	_, err = fmt.Fprintf(out, "note: -spiffe: a client certificate's identity is its spiffe ID, not its name: "+
		"grants must name %s<name> (%sagent-a, …); the tokens and the JWT keep the bare names\n", id, id)
	return err
}

func (o *options) writeJWT() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	jwk, err := devpki.JWK("dev-es256", "ES256", &key.PublicKey)
	if err != nil {
		return err
	}
	jwks, err := devpki.JWKS(jwk)
	if err != nil {
		return err
	}
	keyPEM, err := devpki.PrivateKeyPEM(key)
	if err != nil {
		return err
	}
	now := time.Now()
	token, err := devpki.SignJWT(key, "ES256", "dev-es256", map[string]any{
		"sub": "agent-a", "iss": o.issuer, "aud": o.audience,
		"iat": now.Unix(), "exp": now.Add(o.tokenTTL).Unix(),
	})
	if err != nil {
		return err
	}
	if err := o.write("jwks.json", append(jwks, '\n'), 0o644); err != nil {
		return err
	}
	if err := o.write("jwt-signing-key.pem", keyPEM, 0o600); err != nil {
		return err
	}
	return o.write("agent-a.jwt", []byte(token+"\n"), 0o600)
}

func (o *options) writePair(name string, p *devpki.Pair) error {
	if err := o.write(name+".pem", p.CertPEM, 0o644); err != nil {
		return err
	}
	return o.write(name+"-key.pem", p.KeyPEM, 0o600)
}

func (o *options) write(name string, data []byte, mode fs.FileMode) error {
	path := filepath.Join(o.dir, name)
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !o.force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (use -force to overwrite)", path)
	}
	if err != nil {
		return err
	}
	// Before the write: a file -force truncates keeps its mode, which may let others
	// read the key or token about to be written.
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
