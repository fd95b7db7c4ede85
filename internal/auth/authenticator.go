package auth

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// Authenticator turns a request's credentials into an [Identity]. It is safe for
// concurrent use. Whether it authenticates at all, and whether client certificates are
// identities, are fixed by [New]; its bearer credentials (the token table and the JWT
// keys) are replaced whole by [Authenticator.ReplaceCredentials], as a reload does.
type Authenticator struct {
	enabled bool
	mtls    bool
	// bearers is read once per authentication: an RPC sees one token table and one set
	// of JWT keys, the old or the new, never a mix.
	bearers atomic.Pointer[bearers]
	log     *zap.Logger
	now     func() time.Time
}

// bearers are the credentials a bearer token is checked against: the static tokens and
// the JWT verifier, each nil when not configured.
type bearers struct {
	tokens *tokenSet
	jwt    *jwtVerifier
}

// New builds the authenticator and the authorizer of cfg, reading the token and JWKS
// files (a reload builds anew and hands the result to [Authenticator.ReplaceCredentials]). With no authentication method configured both allow everything and every
// caller is [Anonymous]; grants without an authentication method are an error, and so
// is authentication without grants (it would refuse every call).
func New(cfg Config, opts ...Option) (*Authenticator, *Authorizer, error) {
	o := applyOptions(opts)
	if !cfg.enabled() {
		if len(cfg.Grants) > 0 || cfg.Issuer != "" || cfg.Audience != "" {
			return nil, nil, configError("grants and jwt settings need an authentication method: tls.client_ca_file, token_file or jwks_file")
		}
		return &Authenticator{log: o.logger}, newAuthorizer(false, nil, o), nil
	}
	if (cfg.Issuer != "" || cfg.Audience != "") && cfg.JWKSFile == "" {
		return nil, nil, configError("jwt.issuer and jwt.audience need jwks_file")
	}
	grants, err := compileGrants(cfg.Grants)
	if err != nil {
		return nil, nil, err
	}
	if len(grants) == 0 {
		return nil, nil, configError("authentication is configured but no grants are: every call would be refused")
	}
	a := &Authenticator{enabled: true, mtls: cfg.MTLS, log: o.logger, now: o.clock}
	var b bearers
	if cfg.TokenFile != "" {
		if b.tokens, err = loadTokenFile(cfg.TokenFile); err != nil {
			return nil, nil, err
		}
		if b.tokens.plaintext {
			if fi, err := os.Stat(cfg.TokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
				o.logger.Warn("token file holds plaintext tokens and is readable by group or others; chmod 600 it or list sha256: hashes",
					zap.String("file", cfg.TokenFile), zap.Stringer("mode", fi.Mode().Perm()))
			}
		}
	}
	if cfg.JWKSFile != "" {
		keys, err := loadJWKSFile(cfg.JWKSFile)
		if err != nil {
			return nil, nil, err
		}
		b.jwt = &jwtVerifier{keys: keys, issuer: cfg.Issuer, audience: cfg.Audience, leeway: o.leeway, now: o.clock}
		if cfg.Audience == "" {
			o.logger.Warn("jwt.audience is not set: only tokens without an aud claim are accepted")
		}
	}
	a.bearers.Store(&b)
	return a, newAuthorizer(true, grants, o), nil
}

// ReplaceCredentials makes next's token table and JWT keys and claims (issuer,
// audience) the ones a checks from its next authentication on: next is built by [New]
// from a reloaded configuration, so a token deleted from the token file, or a key from
// the JWKS file, is refused from the next RPC. A stream authenticated before keeps its
// identity (streams are authenticated once, when they open). Whether authentication is
// on and whether client certificates are identities are a's for good: a next that
// differs in either is refused, and a keeps its credentials.
func (a *Authenticator) ReplaceCredentials(next *Authenticator) error {
	if next.enabled != a.enabled || next.mtls != a.mtls {
		return configError("turning authentication or client certificates on or off takes a restart")
	}
	if a.enabled {
		a.bearers.Store(next.bearers.Load())
	}
	return nil
}

// Enabled reports whether callers are authenticated at all.
func (a *Authenticator) Enabled() bool { return a.enabled }

// Authenticate returns the caller of ctx (an incoming gRPC context). A bearer token, when
// sent, decides the identity and must be valid; otherwise a verified client certificate
// does. Failures are [*CredentialError]s.
func (a *Authenticator) Authenticate(ctx context.Context) (Identity, error) {
	if !a.enabled {
		return Identity{Name: Anonymous, Method: MethodAnonymous}, nil
	}
	b := a.bearers.Load()
	md, _ := metadata.FromIncomingContext(ctx)
	switch vals := md.Get("authorization"); len(vals) {
	case 0:
	case 1:
		// The token decides the identity but does not stand in for the connection's
		// certificate, which a new connection's handshake would refuse once expired.
		var certExpires time.Time
		if a.mtls {
			certExpires = peerCertExpiry(ctx)
			if err := a.unexpired(certExpires); err != nil {
				return Identity{}, err
			}
		}
		id, err := b.bearer(vals[0])
		if err != nil {
			return Identity{}, err
		}
		id.CertExpires = certExpires
		return id, nil
	default:
		return Identity{}, invalidToken("more than one authorization header")
	}
	if a.mtls {
		id, ok, err := peerCertIdentity(ctx)
		if err != nil {
			return Identity{}, err
		}
		if ok {
			return id, a.unexpired(id.Expires)
		}
	}
	return Identity{}, &CredentialError{Reason: ReasonMissingCredentials, Detail: a.missingDetail(b)}
}

// unexpired refuses a client certificate, verified until expires (zero: none), that has
// expired since its connection's handshake verified it: a connection stays open, and
// its calls are authenticated with the handshake's certificate, for as long as the
// client keeps it.
func (a *Authenticator) unexpired(expires time.Time) error {
	if expires.IsZero() || !a.now().After(expires) {
		return nil
	}
	return &CredentialError{Reason: ReasonCertificateExpired,
		Detail: "client certificate expired at " + expires.UTC().Format(time.RFC3339) + "; connect again with a renewed certificate"}
}

func (b *bearers) bearer(header string) (Identity, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "bearer") {
		return Identity{}, invalidToken(`the authorization header must read "Bearer <token>"`)
	}
	if token == "" {
		return Identity{}, &CredentialError{Reason: ReasonMissingCredentials, Detail: "empty bearer token"}
	}
	if b.tokens == nil && b.jwt == nil {
		return Identity{}, invalidToken("bearer tokens are not accepted here: authenticate with a client certificate")
	}
	if b.tokens != nil {
		if name, ok := b.tokens.lookup(token); ok {
			return Identity{Name: name, Method: MethodToken}, nil
		}
	}
	if b.jwt != nil && (b.tokens == nil || strings.Count(token, ".") == 2) {
		sub, until, err := b.jwt.check(token)
		if err != nil {
			return Identity{}, err
		}
		return Identity{Name: sub, Method: MethodJWT, Expires: until}, nil
	}
	return Identity{}, invalidToken("unknown token")
}

func (a *Authenticator) missingDetail(b *bearers) string {
	switch {
	case a.mtls && (b.tokens != nil || b.jwt != nil):
		return `missing credentials: send "authorization: Bearer <token>" or connect with a client certificate`
	case a.mtls:
		return "missing credentials: connect with a client certificate"
	}
	return `missing credentials: send "authorization: Bearer <token>"`
}
