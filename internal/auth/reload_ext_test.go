package auth_test

import (
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
