package auth_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/devpki"
)

var jwtNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type jwtFixture struct {
	rsa     crypto.Signer
	ec      crypto.Signer
	ed      crypto.Signer
	jwks    []byte
	rsaJWKS map[string]any
}

func newJWTFixture(t *testing.T) *jwtFixture {
	t.Helper()
	f := &jwtFixture{rsa: testRSAKey(t), ec: newECKey(t)}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.ed = ed
	rk, err := devpki.JWK("rsa-1", "RS256", f.rsa.Public())
	if err != nil {
		t.Fatal(err)
	}
	ek, err := devpki.JWK("ec-1", "", f.ec.Public()) // no alg: any EC algorithm of its curve
	if err != nil {
		t.Fatal(err)
	}
	dk, err := devpki.JWK("ed-1", "EdDSA", f.ed.Public())
	if err != nil {
		t.Fatal(err)
	}
	f.rsaJWKS = rk
	if f.jwks, err = devpki.JWKS(rk, ek, dk); err != nil {
		t.Fatal(err)
	}
	return f
}

func claims(mod func(map[string]any)) map[string]any {
	c := map[string]any{
		"sub": "agent-a", "iss": "https://issuer.test", "aud": []string{"other", "toolsd"},
		"iat": jwtNow.Add(-time.Minute).Unix(), "nbf": jwtNow.Add(-time.Minute).Unix(), "exp": jwtNow.Add(time.Hour).Unix(),
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func sign(t *testing.T, key crypto.Signer, alg, kid string, c map[string]any) string {
	t.Helper()
	tok, err := devpki.SignJWT(key, alg, kid, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func segment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// hmacConfused is the classic alg-confusion forgery: HS256 keyed with the RSA public
// key as a verifier holding that key would see it.
func hmacConfused(t *testing.T, pub crypto.PublicKey, secret []byte) string {
	t.Helper()
	signed := segment(t, map[string]any{"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}) + "." + segment(t, claims(nil))
	if secret == nil {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		secret = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func TestJWT(t *testing.T) {
	f := newJWTFixture(t)
	jwks := writeFile(t, "jwks.json", f.jwks)
	a, _ := mustNew(t, auth.Config{
		JWKSFile: jwks, Issuer: "https://issuer.test", Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}},
	}, auth.WithClock(func() time.Time { return jwtNow }), auth.WithLeeway(30*time.Second))
	conn := dial(t, startServer(t, a, nil), nil)

	other := newECKey(t)
	valid := sign(t, f.rsa, "RS256", "rsa-1", claims(nil))
	parts := strings.Split(valid, ".")
	tamperedSig := parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4] + "AAAA"
	swappedClaims := parts[0] + "." + segment(t, claims(func(c map[string]any) { c["sub"] = "operator" })) + "." + parts[2]
	noneToken := segment(t, map[string]any{"alg": "none", "kid": "rsa-1"}) + "." + segment(t, claims(nil)) + "."
	noneSigned := segment(t, map[string]any{"alg": "none", "kid": "rsa-1"}) + "." + segment(t, claims(nil)) + "." + parts[2]
	nB64, _ := f.rsaJWKS["n"].(string)

	tests := map[string]struct {
		token      string
		want       string
		wantReason string
		wantDetail string
	}{
		"RS256 valid":              {token: valid, want: "jwt:agent-a"},
		"ES256 valid":              {token: sign(t, f.ec, "ES256", "ec-1", claims(nil)), want: "jwt:agent-a"},
		"EdDSA valid":              {token: sign(t, f.ed, "EdDSA", "ed-1", claims(nil)), want: "jwt:agent-a"},
		"aud as a string":          {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["aud"] = "toolsd" })), want: "jwt:agent-a"},
		"expired within leeway":    {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["exp"] = jwtNow.Add(-20 * time.Second).Unix() })), want: "jwt:agent-a"},
		"nbf within leeway":        {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["nbf"] = jwtNow.Add(20 * time.Second).Unix() })), want: "jwt:agent-a"},
		"expired":                  {token: sign(t, f.rsa, "RS256", "rsa-1", claims(func(c map[string]any) { c["exp"] = jwtNow.Add(-time.Minute).Unix() })), wantReason: auth.ReasonTokenExpired, wantDetail: "expired at 2030-01-02T03:03:05Z"},
		"not yet valid":            {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["nbf"] = jwtNow.Add(time.Minute).Unix() })), wantReason: auth.ReasonInvalidToken, wantDetail: "not valid before"},
		"no exp":                   {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "exp") })), wantReason: auth.ReasonInvalidToken, wantDetail: "no exp"},
		"exp as a string":          {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["exp"] = "1999999999" })), wantReason: auth.ReasonInvalidToken, wantDetail: "claims"},
		"wrong audience":           {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["aud"] = []string{"billing"} })), wantReason: auth.ReasonInvalidToken, wantDetail: "audience"},
		"no audience":              {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "aud") })), wantReason: auth.ReasonInvalidToken, wantDetail: "audience"},
		"wrong issuer":             {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { c["iss"] = "https://evil.test" })), wantReason: auth.ReasonInvalidToken, wantDetail: "issuer"},
		"no sub":                   {token: sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "sub") })), wantReason: auth.ReasonInvalidToken, wantDetail: "no sub"},
		"bad signature":            {token: tamperedSig, wantReason: auth.ReasonInvalidToken, wantDetail: "signature does not verify"},
		"claims swapped":           {token: swappedClaims, wantReason: auth.ReasonInvalidToken, wantDetail: "signature does not verify"},
		"signed by another key":    {token: sign(t, other, "ES256", "ec-1", claims(nil)), wantReason: auth.ReasonInvalidToken, wantDetail: "signature does not verify"},
		"alg none":                 {token: noneToken, wantReason: auth.ReasonInvalidToken, wantDetail: "alg none"},
		"alg none with signature":  {token: noneSigned, wantReason: auth.ReasonInvalidToken, wantDetail: "alg none"},
		"HS256 with RSA key (PEM)": {token: hmacConfused(t, f.rsa.Public(), nil), wantReason: auth.ReasonInvalidToken, wantDetail: "HMAC"},
		"HS256 with RSA key (n)":   {token: hmacConfused(t, nil, []byte(nB64)), wantReason: auth.ReasonInvalidToken, wantDetail: "HMAC"},
		"RS256 on an EC key":       {token: sign(t, f.rsa, "RS256", "ec-1", claims(nil)), wantReason: auth.ReasonInvalidToken, wantDetail: "does not fit"},
		"PS256 on an RS256 key":    {token: sign(t, f.rsa, "PS256", "rsa-1", claims(nil)), wantReason: auth.ReasonInvalidToken, wantDetail: "does not match the key's alg"},
		"ES384 on a P-256 key":     {token: esWrongCurve(t), wantReason: auth.ReasonInvalidToken, wantDetail: "does not fit"},
		"unknown kid":              {token: sign(t, f.rsa, "RS256", "rsa-2", claims(nil)), wantReason: auth.ReasonInvalidToken, wantDetail: `signing key "rsa-2" is not in the JWKS`},
		"no kid with many keys":    {token: sign(t, f.rsa, "RS256", "", claims(nil)), wantReason: auth.ReasonInvalidToken, wantDetail: "no kid"},
		"crit header":              {token: critToken(t, f), wantReason: auth.ReasonInvalidToken, wantDetail: "critical"},
		"not a JWT":                {token: "abc.def", wantReason: auth.ReasonInvalidToken, wantDetail: "not a JWT"},
		"garbage header":           {token: "!!!.e30.AAAA", wantReason: auth.ReasonInvalidToken, wantDetail: "header"},
		"oversized":                {token: strings.Repeat("a", 20<<10) + ".b.c", wantReason: auth.ReasonInvalidToken, wantDetail: "longer than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := callUnary(testContext(t), conn, "Bearer "+tc.token)
			if tc.wantReason == "" {
				if err != nil || got != tc.want {
					t.Fatalf("WhoAmI(%s) = %q, %v, want %q", name, got, err, tc.want)
				}
				return
			}
			code, reason := errReason(err)
			if code != codes.Unauthenticated || reason != tc.wantReason || !strings.Contains(err.Error(), tc.wantDetail) {
				t.Fatalf("WhoAmI(%s) error = %v (%s), want Unauthenticated %s mentioning %q", name, err, reason, tc.wantReason, tc.wantDetail)
			}
		})
	}
}

// esWrongCurve signs ES384 with a P-384 key but names the P-256 key "ec-1".
func esWrongCurve(t *testing.T) string {
	t.Helper()
	signed := segment(t, map[string]any{"alg": "ES384", "kid": "ec-1"}) + "." + segment(t, claims(nil))
	return signed + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 96))
}

func critToken(t *testing.T, f *jwtFixture) string {
	t.Helper()
	signed := segment(t, map[string]any{"alg": "ES256", "kid": "ec-1", "crit": []string{"exp"}}) + "." + segment(t, claims(nil))
	sig, err := devpki.Sign(f.ec, "ES256", []byte(signed))
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestJWTWithoutAudienceRejectsAudiencedTokens(t *testing.T) {
	f := newJWTFixture(t)
	a, _ := mustNew(t, auth.Config{JWKSFile: writeFile(t, "jwks.json", f.jwks), Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}}},
		auth.WithClock(func() time.Time { return jwtNow }))
	conn := dial(t, startServer(t, a, nil), nil)
	noAud := sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "aud"); delete(c, "iss") }))
	if got, err := callUnary(testContext(t), conn, "Bearer "+noAud); err != nil || got != "jwt:agent-a" {
		t.Errorf("WhoAmI(no aud) = %q, %v, want jwt:agent-a", got, err)
	}
	withAud := sign(t, f.ec, "ES256", "ec-1", claims(nil))
	if _, err := callUnary(testContext(t), conn, "Bearer "+withAud); codeOf(err) != codes.Unauthenticated {
		t.Errorf("WhoAmI(aud, none configured) = %v, want Unauthenticated", err)
	}
}

func dupJWKS(t *testing.T, k map[string]any) string {
	t.Helper()
	b, err := devpki.JWKS(k, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func codeOf(err error) codes.Code {
	c, _ := errReason(err)
	return c
}

func TestJWKSInvalid(t *testing.T) {
	f := newJWTFixture(t)
	ecPub, err := devpki.JWK("ec", "", f.ec.Public())
	if err != nil {
		t.Fatal(err)
	}
	with := func(mod func(k map[string]any)) string {
		k := map[string]any{}
		for n, v := range ecPub {
			k[n] = v
		}
		mod(k)
		b, _ := devpki.JWKS(k)
		return string(b)
	}
	tests := map[string]struct {
		jwks string
		want string
	}{
		"not json":        {jwks: "{", want: "not a JWK set"},
		"no keys":         {jwks: `{"keys":[]}`, want: "no signature keys"},
		"private EC key":  {jwks: with(func(k map[string]any) { k["d"] = "AAAA" }), want: "public keys only"},
		"symmetric key":   {jwks: `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, want: "public keys only"},
		"small RSA key":   {jwks: `{"keys":[{"kty":"RSA","n":"` + base64.RawURLEncoding.EncodeToString(make([]byte, 128)) + `","e":"AQAB"}]}`, want: "under the minimum"},
		"point off curve": {jwks: with(func(k map[string]any) { k["y"] = k["x"] }), want: "EC key"},
		"alg mismatch":    {jwks: with(func(k map[string]any) { k["alg"] = "RS256" }), want: "does not fit"},
		"HS alg":          {jwks: with(func(k map[string]any) { k["alg"] = "HS256" }), want: "unsupported alg"},
		"duplicate kid":   {jwks: dupJWKS(t, ecPub), want: "appears twice"},
		"only enc keys":   {jwks: with(func(k map[string]any) { k["use"] = "enc" }), want: "no signature keys"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := auth.New(auth.Config{JWKSFile: writeFile(t, "jwks.json", []byte(tc.jwks)), Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(jwks %s) = %v, want an error mentioning %q", name, err, tc.want)
			}
		})
	}
}

// TestJWTExpiresAfterCaching: a token verified once (and cached) still expires; its
// identity says when, verified or cached.
func TestJWTExpiresAfterCaching(t *testing.T) {
	f := newJWTFixture(t)
	var now atomic.Int64
	now.Store(jwtNow.Unix())
	a, _ := mustNew(t, auth.Config{JWKSFile: writeFile(t, "jwks.json", f.jwks), Audience: "toolsd", Grants: []auth.Grant{{Identity: "*", Role: auth.RoleOperator}}},
		auth.WithClock(func() time.Time { return time.Unix(now.Load(), 0) }), auth.WithLeeway(10*time.Second))
	token := sign(t, f.ec, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "iss") }))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	for range 2 {
		if id, err := a.Authenticate(ctx); err != nil || id.Name != "agent-a" || !id.Expires.Equal(jwtNow.Add(time.Hour+10*time.Second)) {
			t.Fatalf("Authenticate(valid token) = %+v, %v, want agent-a, expiring at exp + the leeway", id, err)
		}
	}
	now.Store(jwtNow.Add(time.Hour + 11*time.Second).Unix())
	_, err := a.Authenticate(ctx)
	var ce *auth.CredentialError
	if !errors.As(err, &ce) || ce.Reason != auth.ReasonTokenExpired {
		t.Fatalf("Authenticate(cached token after exp) = %v, want %s", err, auth.ReasonTokenExpired)
	}
}

// signRaw signs claims given as raw JSON, so a test controls member order and spelling.
func signRaw(t *testing.T, key crypto.Signer, alg, kid, rawClaims string) string {
	t.Helper()
	signed := segment(t, map[string]any{"alg": alg, "kid": kid}) + "." + base64.RawURLEncoding.EncodeToString([]byte(rawClaims))
	sig, err := devpki.Sign(key, alg, []byte(signed))
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestJWTClaimNamesAreExact: claim names are case-sensitive (RFC 7519 §4), so a custom
// claim an issuer lets a user set, spelled "Sub" or "EXP", is not the subject or the
// expiry; and a claim given twice is ambiguous, so the token is refused.
func TestJWTClaimNamesAreExact(t *testing.T) {
	f := newJWTFixture(t)
	a, _ := mustNew(t, auth.Config{
		JWKSFile: writeFile(t, "jwks.json", f.jwks), Issuer: "https://issuer.test", Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}},
	}, auth.WithClock(func() time.Time { return jwtNow }))
	iat, past, future := jwtNow.Add(-time.Hour).Unix(), jwtNow.Add(-time.Minute).Unix(), jwtNow.Add(time.Hour).Unix()
	base := func(sub string, exp int64) string {
		return `{"iss":"https://issuer.test","aud":"toolsd","iat":` + strconv.FormatInt(iat, 10) +
			`,"exp":` + strconv.FormatInt(exp, 10) + `,"sub":"` + sub + `"`
	}
	tests := map[string]struct {
		claims     string
		want       string // identity, or "" for a refusal with wantReason
		wantReason string
	}{
		"Sub after sub":      {claims: base("agent-a", future) + `,"Sub":"operator"}`, want: "agent-a"},
		"SUB without sub":    {claims: `{"iss":"https://issuer.test","aud":"toolsd","exp":` + strconv.FormatInt(future, 10) + `,"SUB":"operator"}`, wantReason: auth.ReasonInvalidToken},
		"EXP after exp":      {claims: base("agent-a", past) + `,"EXP":` + strconv.FormatInt(future, 10) + `}`, wantReason: auth.ReasonTokenExpired},
		"Aud after aud":      {claims: `{"iss":"https://issuer.test","aud":"billing","exp":` + strconv.FormatInt(future, 10) + `,"sub":"agent-a","Aud":"toolsd"}`, wantReason: auth.ReasonInvalidToken},
		"ISS after iss":      {claims: `{"iss":"https://evil.test","aud":"toolsd","exp":` + strconv.FormatInt(future, 10) + `,"sub":"agent-a","ISS":"https://issuer.test"}`, wantReason: auth.ReasonInvalidToken},
		"sub given twice":    {claims: base("agent-a", future) + `,"sub":"operator"}`, wantReason: auth.ReasonInvalidToken},
		"exact names accept": {claims: base("agent-a", future) + `}`, want: "agent-a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			token := signRaw(t, f.ec, "ES256", "ec-1", tc.claims)
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
			id, err := a.Authenticate(ctx)
			if tc.want != "" {
				if err != nil || id.Name != tc.want {
					t.Fatalf("Authenticate(%s) = %+v, %v, want identity %q", tc.claims, id, err, tc.want)
				}
				return
			}
			var ce *auth.CredentialError
			if !errors.As(err, &ce) || ce.Reason != tc.wantReason {
				t.Fatalf("Authenticate(%s) = %+v, %v, want %s", tc.claims, id, err, tc.wantReason)
			}
		})
	}
}

// TestJWKSErrorsNameTheKey: the JSON decoder gives no lines, so a key the JWKS refuses
// is named by its index in keys and, when it has one, its kid.
func TestJWKSErrorsNameTheKey(t *testing.T) {
	f := newJWTFixture(t)
	good, err := devpki.JWK("good", "", f.ec.Public())
	if err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]map[string]any{
		`keys[1] (kid "k-2"): unsupported kty "XX"`: {"kty": "XX", "kid": "k-2"},
		`keys[1]: unsupported kty "XX"`:             {"kty": "XX"},
		`keys[1] (kid "k-2"): holds private`:        {"kty": "oct", "kid": "k-2", "k": "c2VjcmV0"},
	} {
		b, err := devpki.JWKS(good, bad)
		if err != nil {
			t.Fatal(err)
		}
		file := writeFile(t, "jwks.json", b)
		_, _, err = auth.New(auth.Config{JWKSFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
		if want := "jwks file " + file + ": " + want; !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(jwks with %v) = %v, want ErrInvalidConfig mentioning %q", bad, err, want)
		}
	}
}

// TestJWKSDuplicateKidNamesBothKeys: a kid given twice names both keys by their index in
// keys (a skipped encryption key still counts) and quotes the kid cut short.
func TestJWKSDuplicateKidNamesBothKeys(t *testing.T) {
	f := newJWTFixture(t)
	kid := strings.Repeat("k", 300)
	first, err := devpki.JWK(kid, "", f.ec.Public())
	if err != nil {
		t.Fatal(err)
	}
	second, err := devpki.JWK(kid, "", f.ed.Public())
	if err != nil {
		t.Fatal(err)
	}
	b, err := devpki.JWKS(first, map[string]any{"kty": "XX", "use": "enc"}, second)
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "jwks.json", b)
	_, _, err = auth.New(auth.Config{JWKSFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
	want := "jwks file " + file + `: keys[2] (kid "` + strings.Repeat("k", 64) + `…"): kid appears twice (first at keys[0])`
	if !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), kid) {
		t.Fatalf("New(jwks with a kid twice) = %v, want ErrInvalidConfig mentioning %q", err, want)
	}
}

// TestJWKSSyntaxErrorSaysWhere: a JWKS that is not JSON is named by file:line:column, the
// column counted in characters, so that the mistake can be found.
func TestJWKSSyntaxErrorSaysWhere(t *testing.T) {
	tests := map[string]struct {
		content string
		want    string
	}{
		"first line":      {content: `{"keys" [`, want: ":1:9: not a JWK set: invalid character '['"},
		"later line":      {content: "{\n  \"keys\": [\n    {\"kid\": \"é\", x}\n  ]\n}\n", want: ":3:18: not a JWK set: invalid character 'x'"},
		"cut short":       {content: "{\"keys\": [\n", want: ":2:1: not a JWK set: unexpected end of JSON input"},
		"byte order mark": {content: "\ufeff{\"keys\" [", want: ":1:9: not a JWK set: invalid character '['"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, "jwks.json", []byte(tc.content))
			_, _, err := auth.New(auth.Config{JWKSFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
			if want := "jwks file " + file + tc.want; !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
				t.Fatalf("New(jwks %q) = %v, want ErrInvalidConfig mentioning %q", tc.content, err, want)
			}
		})
	}
}

// TestJWKSWithByteOrderMark: a JWKS file that an editor saved with a byte order mark
// loads, as a token file does (it was refused as invalid JSON).
func TestJWKSWithByteOrderMark(t *testing.T) {
	f := newJWTFixture(t)
	file := writeFile(t, "jwks.json", append([]byte("\ufeff"), f.jwks...))
	if _, _, err := auth.New(auth.Config{JWKSFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}}); err != nil {
		t.Fatalf("New(jwks with a byte order mark) = %v, want it loaded", err)
	}
}

// TestJWTClaimOfTheWrongTypeSaysSo: a claim of the wrong JSON type is named with what it
// should be, in the UNAUTHENTICATED status a client reads; the status carried
// encoding/json's text, in Go's terms ("sub: json: cannot unmarshal number into Go value
// of type string").
func TestJWTClaimOfTheWrongTypeSaysSo(t *testing.T) {
	f := newJWTFixture(t)
	a, _ := mustNew(t, auth.Config{
		JWKSFile: writeFile(t, "jwks.json", f.jwks), Issuer: "https://issuer.test", Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}},
	}, auth.WithClock(func() time.Time { return jwtNow }))
	conn := dial(t, startServer(t, a, nil), nil)
	exp := strconv.FormatInt(jwtNow.Add(time.Hour).Unix(), 10)
	for want, claims := range map[string]string{
		"claims: sub: not a string":                        `{"iss":"https://issuer.test","aud":"toolsd","exp":` + exp + `,"sub":5}`,
		"claims: iss: not a string":                        `{"iss":true,"aud":"toolsd","exp":` + exp + `,"sub":"agent-a"}`,
		"claims: aud: not a string or an array of strings": `{"iss":"https://issuer.test","aud":[1],"exp":` + exp + `,"sub":"agent-a"}`,
		"claims: exp: not a number":                        `{"iss":"https://issuer.test","aud":"toolsd","exp":"` + exp + `","sub":"agent-a"}`,
	} {
		_, err := callUnary(testContext(t), conn, "Bearer "+signRaw(t, f.ec, "ES256", "ec-1", claims))
		msg := status.Convert(err).Message()
		if code, reason := errReason(err); code != codes.Unauthenticated || reason != auth.ReasonInvalidToken ||
			!strings.HasSuffix(msg, want) || strings.Contains(msg, "Go value") {
			t.Errorf("call with claims %s = %v, want Unauthenticated (%s) ending %q", claims, err, auth.ReasonInvalidToken, want)
		}
	}
}

// TestJWTNotStrictJSONSaysWhere: a token whose claims are not strict JSON is refused
// saying what is wrong and where, without the name of toolsd's JSON parser; the
// UNAUTHENTICATED status read "claims: not strict JSON: jsonx: duplicate key ...".
func TestJWTNotStrictJSONSaysWhere(t *testing.T) {
	f := newJWTFixture(t)
	a, _ := mustNew(t, auth.Config{
		JWKSFile: writeFile(t, "jwks.json", f.jwks), Issuer: "https://issuer.test", Audience: "toolsd",
		Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}},
	}, auth.WithClock(func() time.Time { return jwtNow }))
	conn := dial(t, startServer(t, a, nil), nil)
	exp := strconv.FormatInt(jwtNow.Add(time.Hour).Unix(), 10)
	claims := `{"iss":"https://issuer.test","aud":"toolsd","exp":` + exp + `,"sub":"agent-a","sub":"operator"}`
	_, err := callUnary(testContext(t), conn, "Bearer "+signRaw(t, f.ec, "ES256", "ec-1", claims))
	msg := status.Convert(err).Message()
	want := `claims: not strict JSON: duplicate key "sub" at offset ` + strconv.Itoa(strings.LastIndex(claims, `"sub"`))
	if code, reason := errReason(err); code != codes.Unauthenticated || reason != auth.ReasonInvalidToken || !strings.HasSuffix(msg, want) || strings.Contains(msg, "jsonx") {
		t.Errorf("call with claims %s = %v, want Unauthenticated (%s) ending %q", claims, err, auth.ReasonInvalidToken, want)
	}
}
