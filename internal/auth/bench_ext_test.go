package auth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/devpki"
)

// BenchmarkAuthenticate is the per-RPC cost of each credential kind (100 static tokens).
func BenchmarkAuthenticate(b *testing.B) {
	rsaK, ecK := testRSAKey(b), newECKey(b)
	rk, _ := devpki.JWK("rsa", "RS256", rsaK.Public())
	ek, _ := devpki.JWK("ec", "ES256", ecK.Public())
	jwks, _ := devpki.JWKS(rk, ek)
	var tokens []byte
	for i := range 100 {
		tokens = fmt.Appendf(tokens, "token-%04d-0123456789abcdef agent-%d\n", i, i)
	}
	a, _ := mustNew(b, auth.Config{TokenFile: writeFile(b, "tokens", tokens), JWKSFile: writeFile(b, "jwks.json", jwks), Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "*", Role: auth.RoleOperator}}})
	c := map[string]any{"sub": "agent-a", "aud": "toolsd", "exp": time.Now().Add(time.Hour).Unix()}
	rs, err := devpki.SignJWT(rsaK, "RS256", "rsa", c)
	if err != nil {
		b.Fatal(err)
	}
	es, err := devpki.SignJWT(ecK, "ES256", "ec", c)
	if err != nil {
		b.Fatal(err)
	}
	for name, token := range map[string]string{"static token": "token-0099-0123456789abcdef", "jwt RS256": rs, "jwt ES256": es} {
		b.Run(name, func(b *testing.B) {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
			for b.Loop() {
				if _, err := a.Authenticate(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuthorize is the per-RPC cost of an Execute check that claims its session.
func BenchmarkAuthorize(b *testing.B) {
	_, z := mustNew(b, auth.Config{MTLS: true, Grants: testGrants})
	ctx := asIdentity("agent-a")
	for b.Loop() {
		if err := z.Authorize(ctx, auth.Execute, "tenant-a/bot", "s1"); err != nil {
			b.Fatal(err)
		}
	}
}
