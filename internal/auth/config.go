package auth

import (
	"fmt"

	"github.com/toolsd/toolsd/internal/config"
)

// Roles a grant can give.
const (
	// RoleAgent may read tools and execute in its scopes, and read its own sessions.
	RoleAgent = "agent"
	// RoleProvider may register tools into its scopes.
	RoleProvider = "provider"
	// RoleHook may receive the calls of its scopes.
	RoleHook = "hook"
	// RoleOperator may do everything in its scopes (all scopes when it lists none).
	RoleOperator = "operator"
)

// Config is the auth section of toolsd's configuration.
type Config struct {
	// MTLS accepts verified client certificates as identities. The listener must use
	// [ServerTLSConfig] with a client CA for certificates to be verified.
	MTLS bool
	// TokenFile lists static bearer tokens: "<token> <identity>" lines or YAML (see
	// tokens.go and testdata/tokens.example.*).
	TokenFile string
	// JWKSFile holds the public keys that sign accepted JWTs.
	JWKSFile string
	// Issuer and Audience, when set, must match a JWT's iss and one of its aud.
	Issuer   string
	Audience string
	// Grants give identities roles over scopes; every identity without one is refused.
	Grants []Grant
}

// Grant gives identities matching Identity (exact, or a [path.Match] glob such as
// "agent-*") a role over the scopes matching Scopes (see the scope globs in [Authorizer]).
type Grant struct {
	Identity string
	Role     string
	Scopes   []string
	// At is where the grant is written ("toolsd.yaml:12:7"), for errors; "" when unknown.
	At string
}

// enabled reports whether any authentication method is configured.
func (c Config) enabled() bool { return c.MTLS || c.TokenFile != "" || c.JWKSFile != "" }

// FromConfig converts the config file's auth section, each grant with its place in the
// file. Certificates are verified only when a client CA is set, so that is what turns
// mTLS identities on.
func FromConfig(cfg *config.Config) Config {
	a := cfg.Auth
	c := Config{
		MTLS:      a.TLS.ClientCAFile != "",
		TokenFile: a.TokenFile,
		JWKSFile:  a.JWKSFile,
		Issuer:    a.JWT.Issuer,
		Audience:  a.JWT.Audience,
	}
	for i, g := range a.Grants {
		c.Grants = append(c.Grants, Grant{Identity: g.Identity, Role: g.Role, Scopes: append([]string(nil), g.Scopes...),
			At: cfg.Place(fmt.Sprintf("auth.grants[%d]", i))})
	}
	return c
}
