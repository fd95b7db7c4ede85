// Package devpki makes throwaway credentials for toolsd's tests, the examples' among
// them, and for the devcerts command: a CA, server and client certificates, JWT signing
// keys, their public JWKS and signed tokens. Everything it makes is for development
// only; it must never be used by the daemon itself.
package devpki
