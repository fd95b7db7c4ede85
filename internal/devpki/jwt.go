package devpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha256" // hashes for the algorithms below
	_ "crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

var b64 = base64.RawURLEncoding

// JWK returns the public JWK of pub with kid and, when alg is not empty, alg.
func JWK(kid, alg string, pub crypto.PublicKey) (map[string]any, error) {
	k := map[string]any{"kid": kid, "use": "sig"}
	if alg != "" {
		k["alg"] = alg
	}
	switch p := pub.(type) {
	case *rsa.PublicKey:
		k["kty"] = "RSA"
		k["n"] = b64.EncodeToString(p.N.Bytes())
		k["e"] = b64.EncodeToString(big.NewInt(int64(p.E)).Bytes())
	case *ecdsa.PublicKey:
		raw, err := p.Bytes()
		if err != nil {
			return nil, err
		}
		size := (len(raw) - 1) / 2
		k["kty"] = "EC"
		k["crv"] = p.Curve.Params().Name
		k["x"] = b64.EncodeToString(raw[1 : 1+size])
		k["y"] = b64.EncodeToString(raw[1+size:])
	case ed25519.PublicKey:
		k["kty"] = "OKP"
		k["crv"] = "Ed25519"
		k["x"] = b64.EncodeToString(p)
	default:
		return nil, fmt.Errorf("devpki: unsupported key %T", pub)
	}
	return k, nil
}

// JWKS returns the JSON Web Key Set of keys, indented.
func JWKS(keys ...map[string]any) ([]byte, error) {
	return json.MarshalIndent(map[string]any{"keys": keys}, "", "  ")
}

// SignJWT signs claims with key under alg (RS256/384/512, PS256/384/512,
// ES256/384/512 or EdDSA), naming kid in the header when it is not empty.
func SignJWT(key crypto.Signer, alg, kid string, claims map[string]any) (string, error) {
	head := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		head["kid"] = kid
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return "", err
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(hb) + "." + b64.EncodeToString(cb)
	sig, err := Sign(key, alg, []byte(signed))
	if err != nil {
		return "", err
	}
	return signed + "." + b64.EncodeToString(sig), nil
}

// Sign returns the JWS signature of signed under alg.
func Sign(key crypto.Signer, alg string, signed []byte) ([]byte, error) {
	if alg == "EdDSA" {
		k, ok := key.(ed25519.PrivateKey)
		if !ok {
			return nil, errors.New("devpki: EdDSA needs an Ed25519 key")
		}
		return ed25519.Sign(k, signed), nil
	}
	var hash crypto.Hash
	switch alg[2:] {
	case "256":
		hash = crypto.SHA256
	case "384":
		hash = crypto.SHA384
	case "512":
		hash = crypto.SHA512
	default:
		return nil, fmt.Errorf("devpki: unsupported alg %q", alg)
	}
	h := hash.New()
	h.Write(signed)
	digest := h.Sum(nil)
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if alg[:2] == "PS" {
			return rsa.SignPSS(rand.Reader, k, hash, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
		return rsa.SignPKCS1v15(rand.Reader, k, hash, digest)
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			return nil, err
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		sig := make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
		return sig, nil
	}
	return nil, fmt.Errorf("devpki: unsupported key %T for %s", key, alg)
}

// PrivateKeyPEM encodes key in PKCS #8 PEM.
func PrivateKeyPEM(key crypto.Signer) ([]byte, error) { return keyPEM(key) }

// ParsePrivateKeyPEM decodes a PKCS #8 PEM private key.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("devpki: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("devpki: %T cannot sign", k)
	}
	return s, nil
}
