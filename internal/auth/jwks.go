package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// JWKS limits: the file is local and trusted, but a mistake should fail loudly.
const (
	maxJWKSBytes   = 1 << 20
	maxJWKSKeys    = 100
	minRSAKeyBits  = 2048
	maxRSAExponent = 1<<31 - 1
)

// privateMembers are JWK members that only private or symmetric keys carry (RFC 7518 §6).
// A JWKS holding any of them is refused: the file must contain public keys only.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// verifyKey is one public key of the JWKS.
type verifyKey struct {
	kid string
	alg string // the JWK's "alg"; "" allows every algorithm of the key's type
	pub crypto.PublicKey
}

// keySet is the parsed JWKS.
type keySet struct {
	byKID map[string]*verifyKey
	all   []*verifyKey
}

func loadJWKSFile(file string) (*keySet, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, configError("jwks file: %v", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	if err != nil {
		return nil, configError("jwks file: %v", err)
	}
	if len(data) > maxJWKSBytes {
		return nil, configError("jwks file %s: larger than %d bytes", file, maxJWKSBytes)
	}
	// A byte order mark (some editors write one) is not JSON; a token file drops it too.
	ks, err := parseJWKS(bytes.TrimPrefix(data, []byte("\ufeff")))
	var pe *jsonPosError
	if errors.As(err, &pe) {
		return nil, configError("jwks file %s:%d:%d: %v", file, pe.line, pe.column, pe.err)
	}
	if err != nil {
		return nil, configError("jwks file %s: %v", file, err)
	}
	return ks, nil
}

// parseJWKS reads a JSON Web Key Set (RFC 7517) of public signature keys: RSA (2048 bits
// or more), EC P-256/P-384/P-521 and OKP Ed25519. Encryption keys (use "enc", or
// key_ops without "verify") are skipped; private or symmetric keys are an error.
func parseJWKS(data []byte) (*keySet, error) {
	var doc struct {
		Keys []map[string]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		err = fmt.Errorf("not a JWK set: %w", err)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, column := jsonPosition(data, se.Offset)
			return nil, &jsonPosError{line: line, column: column, err: err}
		}
		return nil, err
	}
	if len(doc.Keys) > maxJWKSKeys {
		return nil, fmt.Errorf("%d keys, over the limit of %d", len(doc.Keys), maxJWKSKeys)
	}
	ks := &keySet{byKID: map[string]*verifyKey{}}
	kidAt := map[string]int{} // the index in keys of each kid
	for i, raw := range doc.Keys {
		k, err := parseJWK(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jwkName(i, raw), err)
		}
		if k == nil {
			continue // not a signature key
		}
		if k.kid != "" {
			if first, dup := kidAt[k.kid]; dup {
				return nil, fmt.Errorf("%s: kid appears twice (first at keys[%d])", jwkName(i, raw), first)
			}
			kidAt[k.kid] = i
			ks.byKID[k.kid] = k
		}
		ks.all = append(ks.all, k)
	}
	if len(ks.all) == 0 {
		return nil, fmt.Errorf("no signature keys")
	}
	return ks, nil
}

// jsonPosError is a JWKS file's error at a line and column (1-based), reported as
// "file:line:column: ...".
type jsonPosError struct {
	line, column int
	err          error
}

func (e *jsonPosError) Error() string {
	return fmt.Sprintf("line %d, column %d: %v", e.line, e.column, e.err)
}

func (e *jsonPosError) Unwrap() error { return e.err }

// jsonPosition returns the line and column, in characters, of the last of the first
// offset bytes of data: where a [json.SyntaxError] with that Offset stopped. An input
// that ends just after a newline ends at column 1 of the next line.
func jsonPosition(data []byte, offset int64) (line, column int) {
	read := data[:min(max(offset, 0), int64(len(data)))]
	last := read[bytes.LastIndexByte(read, '\n')+1:]
	return bytes.Count(read, []byte("\n")) + 1, max(utf8.RuneCount(last), 1)
}

// jwkName names the i-th key of a JWKS in errors: its index and, when it has one, its
// kid, since the JSON decoder gives no line to find it by.
func jwkName(i int, raw map[string]json.RawMessage) string {
	var kid string
	if json.Unmarshal(raw["kid"], &kid) != nil || kid == "" {
		return fmt.Sprintf("keys[%d]", i)
	}
	return fmt.Sprintf("keys[%d] (kid %q)", i, clip(kid))
}

type jwkFields struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

func parseJWK(raw map[string]json.RawMessage) (*verifyKey, error) {
	for _, m := range privateMembers {
		if _, ok := raw[m]; ok {
			return nil, fmt.Errorf("holds private or symmetric key material (%q): a JWKS for toolsd must contain public keys only", m)
		}
	}
	b, _ := json.Marshal(raw)
	var f jwkFields
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Use == "enc" || (f.KeyOps != nil && !slices.Contains(f.KeyOps, "verify")) {
		return nil, nil
	}
	if f.Use != "" && f.Use != "sig" {
		return nil, fmt.Errorf("unknown use %q", f.Use)
	}
	k := &verifyKey{kid: f.Kid, alg: f.Alg}
	var err error
	switch f.Kty {
	case "RSA":
		k.pub, err = rsaKey(f.N, f.E)
	case "EC":
		k.pub, err = ecKey(f.Crv, f.X, f.Y)
	case "OKP":
		k.pub, err = okpKey(f.Crv, f.X)
	case "oct":
		err = fmt.Errorf("symmetric (oct) keys are not accepted")
	default:
		err = fmt.Errorf("unsupported kty %q", f.Kty)
	}
	if err != nil {
		return nil, err
	}
	if f.Alg != "" {
		alg, ok := algorithms[f.Alg]
		if !ok {
			return nil, fmt.Errorf("unsupported alg %q", f.Alg)
		}
		if !alg.fits(k.pub) {
			return nil, fmt.Errorf("alg %q does not fit a %s key", f.Alg, f.Kty)
		}
	}
	return k, nil
}

func rsaKey(n, e string) (*rsa.PublicKey, error) {
	nb, err := keyB64(n)
	if err != nil || len(nb) == 0 {
		return nil, fmt.Errorf("RSA key: bad n")
	}
	eb, err := keyB64(e)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, fmt.Errorf("RSA key: bad e")
	}
	exp := new(big.Int).SetBytes(eb)
	if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > maxRSAExponent || exp.Bit(0) == 0 {
		return nil, fmt.Errorf("RSA key: bad exponent")
	}
	mod := new(big.Int).SetBytes(nb)
	if mod.BitLen() < minRSAKeyBits {
		return nil, fmt.Errorf("RSA key: %d bits, under the minimum of %d", mod.BitLen(), minRSAKeyBits)
	}
	return &rsa.PublicKey{N: mod, E: int(exp.Int64())}, nil
}

func ecKey(crv, x, y string) (*ecdsa.PublicKey, error) {
	curve := curveByName(crv)
	if curve == nil {
		return nil, fmt.Errorf("EC key: unsupported crv %q", crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	xb, errX := keyB64(x)
	yb, errY := keyB64(y)
	if errX != nil || errY != nil || len(xb) != size || len(yb) != size {
		return nil, fmt.Errorf("EC key: x and y must be %d bytes each", size)
	}
	point := append(append([]byte{4}, xb...), yb...)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("EC key: %w", err)
	}
	return pub, nil
}

func okpKey(crv, x string) (ed25519.PublicKey, error) {
	if crv != "Ed25519" {
		return nil, fmt.Errorf("OKP key: unsupported crv %q", crv)
	}
	xb, err := keyB64(x)
	if err != nil || len(xb) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("OKP key: x must be %d bytes", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(xb), nil
}

func curveByName(crv string) elliptic.Curve {
	switch crv {
	case "P-256":
		return elliptic.P256()
	case "P-384":
		return elliptic.P384()
	case "P-521":
		return elliptic.P521()
	}
	return nil
}

// keyB64 decodes a JWK member. Keys come from the operator's own file, so padding is
// tolerated there; tokens are decoded strictly (see jwt.go).
func keyB64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// find returns the key a token names. A token without kid may only be checked when the
// set has exactly one key, so no kid ever means "try them all".
func (ks *keySet) find(kid string) (*verifyKey, error) {
	if kid == "" {
		if len(ks.all) == 1 {
			return ks.all[0], nil
		}
		return nil, invalidToken("no kid in the header and the JWKS has %d keys", len(ks.all))
	}
	k, ok := ks.byKID[kid]
	if !ok {
		return nil, invalidToken("signing key %q is not in the JWKS", clip(kid))
	}
	return k, nil
}
