package auth

import "context"

// How a caller was authenticated: the values of [Identity.Method].
const (
	MethodMTLS      = "mtls"
	MethodToken     = "token"
	MethodJWT       = "jwt"
	MethodAnonymous = "anonymous"
)

// Anonymous is the name of every caller when authentication is off.
const Anonymous = "anonymous"

// Identity is an authenticated caller.
type Identity struct {
	// Name is what grants match: a SPIFFE ID, a certificate CN, a token's identity or a
	// JWT's sub.
	Name string
	// Method is one of the Method* constants.
	Method string
}

type identityKey struct{}

// NewContext returns ctx carrying id. The interceptors call it; tests and in-process
// callers may too.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity the interceptors put in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
