package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// FuzzParseJWT feeds arbitrary bearer tokens to the verifier: it must never panic, and
// must accept nothing but a token whose signature verifies under the JWKS.
func FuzzParseJWT(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	pub, _ := key.PublicKey.Bytes()
	enc := base64.RawURLEncoding.EncodeToString
	jwks := `{"keys":[` +
		`{"kty":"EC","kid":"own","crv":"P-256","x":"` + enc(pub[1:33]) + `","y":"` + enc(pub[33:]) + `"},` +
		strings.TrimSuffix(strings.TrimPrefix(rfcA2JWKS, `{"keys":[`), "]}") + `]}`
	jwks = strings.Replace(jwks, `{"kty":"RSA"`, `{"kty":"RSA","kid":"rfc"`, 1)
	now := time.Unix(rfcExp-60, 0)
	v := rfcVerifier(f, jwks, now)

	head := func(s string) string { return enc([]byte(s)) }
	f.Add(rfcA2Token)
	f.Add(rfcA3Token)
	f.Add(head(`{"alg":"RS256","kid":"rfc"}`) + "." + rfcPayload + "." + strings.Split(rfcA2Token, ".")[2])
	f.Add(head(`{"alg":"none"}`) + "." + head(`{"sub":"x","exp":9999999999}`) + ".")
	f.Add(head(`{"alg":"HS256","kid":"rfc"}`) + "." + head(`{"sub":"x","exp":9999999999}`) + ".AAAA")
	f.Add(head(`{"alg":"ES256","kid":"own","crit":["b64"]}`) + "." + head(`{}`) + ".AAAA")
	f.Add(head(`{"alg":"ES256","kid":"own"}`) + "." + head(`{"sub":"x","exp":1e400,"aud":[1]}`) + "." + enc(make([]byte, 64)))
	f.Add(head(`null`) + "." + head(`null`) + ".")
	f.Add("..")
	f.Add("a.b.c.d")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		sub, _, err := v.check(token)
		if err == nil && sub == "" {
			t.Fatalf("verify(%q) accepted a token without a subject", token)
		}
		if err == nil {
			// Only our own key or the RFC key can have signed it; the fuzzer cannot forge
			// either, so an acceptance means verification is broken.
			t.Fatalf("verify(%q) = %q, accepted a token nobody signed", token, sub)
		}
	})
}
