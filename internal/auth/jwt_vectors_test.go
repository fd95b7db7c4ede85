package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// RFC 7515 Appendix A.2 (RS256) and A.3 (ES256): tokens this package did not sign, to
// check the verifier against the standard rather than against its own signer. Their
// payload is {"iss":"joe","exp":1300819380,"http://example.com/is_root":true}: no sub, so
// a token that passes the signature and time checks fails last with "no sub claim".
const (
	rfcPayload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
	rfcA2JWKS  = `{"keys":[{"kty":"RSA","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"}]}`
	rfcA2Token = "eyJhbGciOiJSUzI1NiJ9." + rfcPayload + ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
	rfcA3JWKS  = `{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	rfcA3Token = "eyJhbGciOiJFUzI1NiJ9." + rfcPayload + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
	rfcExp     = 1300819380
)

func rfcVerifier(t testing.TB, jwks string, now time.Time) *jwtVerifier {
	t.Helper()
	ks, err := parseJWKS([]byte(jwks))
	if err != nil {
		t.Fatalf("parseJWKS(RFC key) = %v", err)
	}
	return &jwtVerifier{keys: ks, leeway: DefaultLeeway, now: func() time.Time { return now }}
}

func TestRFC7515Vectors(t *testing.T) {
	before := time.Unix(rfcExp-60, 0)
	after := time.Unix(rfcExp+3600, 0)
	tests := map[string]struct {
		jwks, token string
		now         time.Time
		wantReason  string
		wantDetail  string
	}{
		"A.2 RS256 verifies":   {jwks: rfcA2JWKS, token: rfcA2Token, now: before, wantReason: ReasonInvalidToken, wantDetail: "no sub claim"},
		"A.3 ES256 verifies":   {jwks: rfcA3JWKS, token: rfcA3Token, now: before, wantReason: ReasonInvalidToken, wantDetail: "no sub claim"},
		"A.2 expired":          {jwks: rfcA2JWKS, token: rfcA2Token, now: after, wantReason: ReasonTokenExpired, wantDetail: "expired at 2011-03-22T18:43:00Z"},
		"A.3 expired":          {jwks: rfcA3JWKS, token: rfcA3Token, now: after, wantReason: ReasonTokenExpired, wantDetail: "expired"},
		"A.2 tampered":         {jwks: rfcA2JWKS, token: strings.Replace(rfcA2Token, ".cC4h", ".cC4i", 1), now: before, wantReason: ReasonInvalidToken, wantDetail: "signature does not verify"},
		"A.3 tampered":         {jwks: rfcA3JWKS, token: strings.Replace(rfcA3Token, ".DtEh", ".DtEi", 1), now: before, wantReason: ReasonInvalidToken, wantDetail: "signature does not verify"},
		"A.3 signature on A.2": {jwks: rfcA2JWKS, token: rfcA3Token, now: before, wantReason: ReasonInvalidToken, wantDetail: "does not fit"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sub, _, err := rfcVerifier(t, tc.jwks, tc.now).verify(tc.token)
			var ce *CredentialError
			if !errors.As(err, &ce) || ce.Reason != tc.wantReason || !strings.Contains(ce.Detail, tc.wantDetail) {
				t.Fatalf("verify(%s) = %q, %v, want %s mentioning %q", name, sub, err, tc.wantReason, tc.wantDetail)
			}
		})
	}
}
