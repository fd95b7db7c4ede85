package auth

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	_ "crypto/sha512" // registers SHA-384 and SHA-512 for RS/PS/ES384 and 512
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/textcut"
)

// maxTokenBytes bounds a bearer token before any decoding.
const maxTokenBytes = 16 << 10

// b64 decodes token segments: unpadded base64url with canonical trailing bits only.
var b64 = base64.RawURLEncoding.Strict()

type keyKind int

const (
	kindPKCS1 keyKind = iota
	kindPSS
	kindECDSA
	kindEdDSA
)

// algorithm is one accepted JWS "alg". HMAC ("HS256" ...) and "none" are absent on
// purpose: toolsd holds public keys only, and a verifier that let a token pick HMAC
// would accept tokens "signed" with the public key as the secret (alg confusion).
type algorithm struct {
	kind  keyKind
	hash  crypto.Hash
	curve elliptic.Curve // ECDSA only
}

var algorithms = map[string]algorithm{
	"RS256": {kind: kindPKCS1, hash: crypto.SHA256},
	"RS384": {kind: kindPKCS1, hash: crypto.SHA384},
	"RS512": {kind: kindPKCS1, hash: crypto.SHA512},
	"PS256": {kind: kindPSS, hash: crypto.SHA256},
	"PS384": {kind: kindPSS, hash: crypto.SHA384},
	"PS512": {kind: kindPSS, hash: crypto.SHA512},
	"ES256": {kind: kindECDSA, hash: crypto.SHA256, curve: elliptic.P256()},
	"ES384": {kind: kindECDSA, hash: crypto.SHA384, curve: elliptic.P384()},
	"ES512": {kind: kindECDSA, hash: crypto.SHA512, curve: elliptic.P521()},
	"EdDSA": {kind: kindEdDSA},
}

// fits reports whether pub is the kind of key the algorithm verifies with.
func (a algorithm) fits(pub crypto.PublicKey) bool {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return a.kind == kindPKCS1 || a.kind == kindPSS
	case *ecdsa.PublicKey:
		return a.kind == kindECDSA && k.Curve == a.curve
	case ed25519.PublicKey:
		return a.kind == kindEdDSA
	}
	return false
}

// verify checks sig over signed; the caller has checked [algorithm.fits].
func (a algorithm) verify(pub crypto.PublicKey, signed, sig []byte) bool {
	if a.kind == kindEdDSA {
		return ed25519.Verify(pub.(ed25519.PublicKey), signed, sig)
	}
	h := a.hash.New()
	h.Write(signed)
	digest := h.Sum(nil)
	switch a.kind {
	case kindPKCS1:
		return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), a.hash, digest, sig) == nil
	case kindPSS:
		return rsa.VerifyPSS(pub.(*rsa.PublicKey), a.hash, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
	case kindECDSA:
		// JWS ECDSA signatures are R || S, each exactly the curve's byte size (RFC 7518 §3.4).
		size := (a.curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		r := new(big.Int).SetBytes(sig[:size])
		s := new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(pub.(*ecdsa.PublicKey), digest, r, s)
	}
	return false
}

// jwtVerifier checks JWTs against the local JWKS. It never fetches anything: "jku",
// "x5u", "jwk" and "x5c" headers are ignored, keys come only from the file.
type jwtVerifier struct {
	keys     *keySet
	issuer   string
	audience string
	leeway   time.Duration
	now      func() time.Time

	// cache remembers tokens that verified, by SHA-256, until they expire: an agent sends
	// the same token on every RPC, and a signature check costs ~100 µs. The keys and
	// rules never change while the process runs, so a verified token stays verified.
	mu    sync.Mutex
	cache map[[sha256.Size]byte]verified
}

type verified struct {
	sub string
	exp time.Time
}

// jwtCacheSize bounds the cache; when full it is emptied (tokens re-verify once).
const jwtCacheSize = 4096

// check is [jwtVerifier.verify] with the cache in front. until is when the token stops
// being accepted: its exp plus the leeway.
func (v *jwtVerifier) check(token string) (sub string, until time.Time, err error) {
	key := sha256.Sum256([]byte(token))
	v.mu.Lock()
	hit, ok := v.cache[key]
	v.mu.Unlock()
	if ok && !v.now().After(hit.exp.Add(v.leeway)) {
		return hit.sub, hit.exp.Add(v.leeway), nil
	}
	sub, exp, err := v.verify(token)
	if err != nil {
		return "", time.Time{}, err
	}
	v.mu.Lock()
	if v.cache == nil || len(v.cache) >= jwtCacheSize {
		v.cache = make(map[[sha256.Size]byte]verified)
	}
	v.cache[key] = verified{sub: sub, exp: exp}
	v.mu.Unlock()
	return sub, exp.Add(v.leeway), nil
}

// jwtHeader and jwtClaims are filled member by member, by exact name (see
// [decodeSegment]).
type jwtHeader struct {
	Alg  string
	Kid  string
	Crit json.RawMessage
}

type jwtClaims struct {
	Sub string
	Iss string
	Aud audience
	Exp *numericDate
	Nbf *numericDate
	Iat *numericDate
}

// verify returns the subject and expiry of a valid token, or a [*CredentialError] saying
// why not. The signature is checked before the claims are even decoded.
func (v *jwtVerifier) verify(token string) (sub string, exp time.Time, err error) {
	if len(token) > maxTokenBytes {
		return "", time.Time{}, invalidToken("longer than %d bytes", maxTokenBytes)
	}
	dot := strings.LastIndexByte(token, '.')
	if strings.Count(token, ".") != 2 {
		return "", time.Time{}, invalidToken("not a JWT (want three dot-separated parts)")
	}
	signed, sigPart := token[:dot], token[dot+1:]
	headPart, payloadPart, _ := strings.Cut(signed, ".")
	head, err := decodeHeader(headPart)
	if err != nil {
		return "", time.Time{}, invalidToken("header: %v", err)
	}
	alg, err := acceptAlg(head.Alg)
	if err != nil {
		return "", time.Time{}, err
	}
	if head.Crit != nil {
		return "", time.Time{}, invalidToken("critical header extensions are not supported")
	}
	key, err := v.keys.find(head.Kid)
	if err != nil {
		return "", time.Time{}, err
	}
	if key.alg != "" && key.alg != head.Alg {
		return "", time.Time{}, invalidToken("alg %q does not match the key's alg %q", head.Alg, key.alg)
	}
	if !alg.fits(key.pub) {
		return "", time.Time{}, invalidToken("alg %q does not fit signing key %q", head.Alg, clip(key.kid))
	}
	sig, err := b64.DecodeString(sigPart)
	if err != nil || len(sig) == 0 {
		return "", time.Time{}, invalidToken("signature is not base64url")
	}
	if !alg.verify(key.pub, []byte(signed), sig) {
		return "", time.Time{}, invalidToken("signature does not verify")
	}
	c, err := decodeClaims(payloadPart)
	if err != nil {
		return "", time.Time{}, invalidToken("claims: %v", err)
	}
	if err := v.checkClaims(c); err != nil {
		return "", time.Time{}, err
	}
	return c.Sub, c.Exp.t, nil
}

func acceptAlg(name string) (algorithm, error) {
	switch {
	case name == "":
		return algorithm{}, invalidToken("no alg in the header")
	case strings.EqualFold(name, "none"):
		return algorithm{}, invalidToken("unsigned tokens (alg none) are not accepted")
	case strings.HasPrefix(strings.ToUpper(name), "HS"):
		return algorithm{}, invalidToken("HMAC tokens (%s) are not accepted: toolsd verifies with public keys only", clip(name))
	}
	alg, ok := algorithms[name]
	if !ok {
		return algorithm{}, invalidToken("unsupported alg %q", clip(name))
	}
	return alg, nil
}

func (v *jwtVerifier) checkClaims(c *jwtClaims) error {
	now := v.now()
	switch {
	case c.Exp == nil:
		return invalidToken("no exp claim: toolsd does not accept tokens that never expire")
	case now.After(c.Exp.t.Add(v.leeway)):
		return &CredentialError{Reason: ReasonTokenExpired, Detail: "token expired at " + c.Exp.t.UTC().Format(time.RFC3339)}
	case c.Nbf != nil && now.Add(v.leeway).Before(c.Nbf.t):
		return invalidToken("not valid before %s", c.Nbf.t.UTC().Format(time.RFC3339))
	case c.Iat != nil && now.Add(v.leeway).Before(c.Iat.t):
		return invalidToken("issued in the future (%s)", c.Iat.t.UTC().Format(time.RFC3339))
	case v.issuer != "" && c.Iss != v.issuer:
		return invalidToken("issuer %q is not %q", clip(c.Iss), v.issuer)
	case v.audience != "" && !c.Aud.has(v.audience):
		return invalidToken("audience %q does not include %q", clip(strings.Join(c.Aud, ",")), v.audience)
	case v.audience == "" && len(c.Aud) > 0:
		// RFC 7519 §4.1.3: a recipient not named in aud must reject the token. Without
		// this, any token the issuer minted for another service would log in here.
		return invalidToken("token is for audience %q and jwt.audience is not configured", clip(strings.Join(c.Aud, ",")))
	case c.Sub == "":
		return invalidToken("no sub claim")
	}
	if err := checkIdentityName(c.Sub); err != nil {
		return invalidToken("sub: %v", err)
	}
	return nil
}

// decodeSegment decodes one base64url segment holding a JSON object into its members,
// keyed by their exact names. Header and claim names are case-sensitive (RFC 7515 §4,
// RFC 7519 §4), and encoding/json would fill a "sub" field from "SUB" or "Sub" too (the
// last of them winning): a custom claim that an issuer lets its users set would then
// override the subject, expiry, issuer or audience it signed. A member given twice is
// as ambiguous, so the segment must be strict JSON (no duplicate names, valid UTF-8).
func decodeSegment(seg string) (map[string]json.RawMessage, error) {
	raw, err := b64.DecodeString(seg)
	if err != nil {
		return nil, fmt.Errorf("not base64url")
	}
	if err := jsonx.Valid(raw, jsonx.Limits{MaxBytes: maxTokenBytes}); err != nil {
		return nil, fmt.Errorf("not strict JSON: %s", clip(jsonx.Describe(err)))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// member decodes the member named exactly name, when present, into v. A member of the
// wrong JSON type is named with the type it should have, in JSON's terms: the text of
// encoding/json's error is in Go's ("cannot unmarshal number into Go value of type
// string"), and reaches the client.
func member(m map[string]json.RawMessage, name string, v any) error {
	raw, ok := m[name]
	if !ok {
		return nil
	}
	err := json.Unmarshal(raw, v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Type.Kind() == reflect.String:
		return fmt.Errorf("%s: not a string", name)
	default:
		return fmt.Errorf("%s: %v", name, clip(err.Error()))
	}
}

func decodeHeader(seg string) (jwtHeader, error) {
	var h jwtHeader
	m, err := decodeSegment(seg)
	if err != nil {
		return h, err
	}
	if err := cmp.Or(member(m, "alg", &h.Alg), member(m, "kid", &h.Kid)); err != nil {
		return h, err
	}
	h.Crit = m["crit"]
	return h, nil
}

func decodeClaims(seg string) (*jwtClaims, error) {
	m, err := decodeSegment(seg)
	if err != nil {
		return nil, err
	}
	c := &jwtClaims{}
	if err := cmp.Or(member(m, "sub", &c.Sub), member(m, "iss", &c.Iss), member(m, "aud", &c.Aud),
		member(m, "exp", &c.Exp), member(m, "nbf", &c.Nbf), member(m, "iat", &c.Iat)); err != nil {
		return nil, err
	}
	return c, nil
}

// audience is the aud claim: a string or an array of strings (RFC 7519 §4.1.3).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = audience{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("not a string or an array of strings")
	}
	*a = list
	return nil
}

func (a audience) has(want string) bool {
	for _, s := range a {
		if s == want {
			return true
		}
	}
	return false
}

// numericDate is a JWT time: a JSON number of seconds since the epoch (never a string).
type numericDate struct{ t time.Time }

// maxNumericDate keeps conversions exact and far from overflow (year 5138).
const maxNumericDate = 1e11

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errors.New("not a number")
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return errors.New("out of range")
	}
	sec, frac := math.Modf(f)
	d.t = time.Unix(int64(sec), int64(frac*1e9))
	return nil
}

// clip bounds attacker-chosen text echoed in errors and logs.
func clip(s string) string { return textcut.Ellipsis(s, 64) }
