package auth_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/devpki"
)

// TestReplaceCredentialsRotatesJWTKeys: a reload that rotates the JWKS file (the old
// key dropped, a new one added) has the next RPC verify JWTs against the new keys only,
// and the jwt claims it checks are the reloaded file's. An authenticator that would
// turn client certificates on is refused, and the keys in force stay.
func TestReplaceCredentialsRotatesJWTKeys(t *testing.T) {
	oldKey, newKey := newECKey(t), newECKey(t)
	jwks := func(kid string, k *ecdsa.PrivateKey) []byte {
		t.Helper()
		jwk, err := devpki.JWK(kid, "ES256", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		b, err := devpki.JWKS(jwk)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sign := func(kid string, k *ecdsa.PrivateKey, iss string) string {
		t.Helper()
		tok, err := devpki.SignJWT(k, "ES256", kid, map[string]any{"sub": "agent-a", "iss": iss, "exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	grants := []auth.Grant{{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{"**"}}}
	file := writeFile(t, "jwks.json", jwks("old", oldKey))
	a, _ := mustNew(t, auth.Config{JWKSFile: file, Issuer: "idp-1", Grants: grants})
	conn := dial(t, startServer(t, a, nil), nil)
	ctx := testContext(t)
	oldJWT, newJWT := sign("old", oldKey, "idp-1"), sign("new", newKey, "idp-2")
	if got, err := callUnary(ctx, conn, oldJWT); err != nil || got != "jwt:agent-a" {
		t.Fatalf("Unary(old key's JWT) = %q, %v, want jwt:agent-a", got, err)
	}

	if err := os.WriteFile(file, jwks("new", newKey), 0o600); err != nil {
		t.Fatal(err)
	}
	next, _ := mustNew(t, auth.Config{JWKSFile: file, Issuer: "idp-2", Grants: grants})
	withCerts, _ := mustNew(t, auth.Config{MTLS: true, JWKSFile: file, Issuer: "idp-2", Grants: grants})
	if err := a.ReplaceCredentials(withCerts); !errors.Is(err, auth.ErrInvalidConfig) {
		t.Errorf("ReplaceCredentials(client certificates turned on) = %v, want ErrInvalidConfig", err)
	}
	if got, err := callUnary(ctx, conn, oldJWT); err != nil || got != "jwt:agent-a" {
		t.Errorf("Unary(old key's JWT) after a refused replacement = %q, %v, want jwt:agent-a", got, err)
	}
	if err := a.ReplaceCredentials(next); err != nil {
		t.Fatalf("ReplaceCredentials(rotated JWKS) = %v", err)
	}
	if _, err := callUnary(ctx, conn, oldJWT); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Unary(dropped key's JWT) after the rotation = %v, want Unauthenticated", err)
	}
	if got, err := callUnary(ctx, conn, newJWT); err != nil || got != "jwt:agent-a" {
		t.Errorf("Unary(new key's JWT, new issuer) after the rotation = %q, %v, want jwt:agent-a", got, err)
	}
}

// TestReplaceGrantsSparesPinnedContexts: after ReplaceGrants a caller is checked against
// the new grants, but a context pinned before (a stream open then) keeps the grants it
// was pinned with, its scope filter too; an authorizer with authorization off is
// refused, and the grants in force stay.
func TestReplaceGrantsSparesPinnedContexts(t *testing.T) {
	tokens := writeFile(t, "tokens.txt", []byte("agent-a-token-0123456789 agent-a\n"))
	grant := func(scope string) []auth.Grant {
		return []auth.Grant{{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{scope}}}
	}
	_, z := mustNew(t, auth.Config{TokenFile: tokens, Grants: grant("tenant-a/**")})
	_, next := mustNew(t, auth.Config{TokenFile: tokens, Grants: grant("tenant-b/**")})
	_, off := mustNew(t, auth.Config{})
	ctx := auth.NewContext(t.Context(), auth.Identity{Name: "agent-a", Method: auth.MethodToken})
	pinned := z.PinGrants(ctx)
	filter, err := z.ScopeFilter(pinned, auth.Execute)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.ReplaceGrants(next); err != nil {
		t.Fatalf("ReplaceGrants() = %v", err)
	}
	if err := z.ReplaceGrants(off); !errors.Is(err, auth.ErrInvalidConfig) {
		t.Errorf("ReplaceGrants(authorization off) = %v, want ErrInvalidConfig", err)
	}
	for _, tc := range []struct {
		what  string
		ctx   context.Context
		scope string
		ok    bool
	}{
		{"a new RPC", ctx, "tenant-b", true},
		{"a new RPC", ctx, "tenant-a", false},
		{"a context pinned before", pinned, "tenant-a", true},
		{"a context pinned before", pinned, "tenant-b", false},
		{"a context pinned after", z.PinGrants(ctx), "tenant-b", true},
	} {
		if err := z.Authorize(tc.ctx, auth.Execute, tc.scope, ""); (err == nil) != tc.ok {
			t.Errorf("Authorize(%s, execute, %q) = %v, want allowed %v", tc.what, tc.scope, err, tc.ok)
		}
	}
	if !filter("tenant-a") || filter("tenant-b") {
		t.Errorf("ScopeFilter(pinned before) after the replacement = tenant-a %v, tenant-b %v, want true, false", filter("tenant-a"), filter("tenant-b"))
	}
	if id, ok := auth.FromContext(pinned); !ok || id.Name != "agent-a" {
		t.Errorf("FromContext(pinned) = %v, %v, want agent-a", id, ok)
	}
}
