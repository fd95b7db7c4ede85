package auth

import (
	"context"
	"time"
)

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
	// Expires, when not zero, is when the credential the caller authenticated with stops
	// being accepted: a JWT's exp plus the leeway, a client certificate's NotAfter (or
	// its verified chain's, if an issuer expires first). Static tokens and anonymous
	// callers have none. A stream is authenticated once, as it opens, and a certificate
	// is checked only at the TLS handshake, so a stream that must not outlive its
	// credential ends itself then (WatchSession does).
	Expires time.Time
	// CertExpires, when not zero, is when the client certificate of the connection a
	// token came on stops being accepted (mTLS on, and the token decided the identity):
	// every RPC on that connection is refused from then on, so a stream that must not
	// outlive its credential ends then too, if that comes before Expires.
	CertExpires time.Time
}

type identityKey struct{}

// NewContext returns ctx carrying id. The interceptors call it; tests and in-process
// callers may too.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity the interceptors put in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	switch v := ctx.Value(identityKey{}).(type) {
	case Identity:
		return v, true
	case pinnedIdentity:
		return v.id, true
	}
	return Identity{}, false
}

// pinnedIdentity is an identity with the grants an [Authorizer] checks it against for
// the rest of its stream (see [Authorizer.PinGrants]). It is kept under the identity's
// key, so that finding the identity finds its grants too.
type pinnedIdentity struct {
	id     Identity
	by     *Authorizer
	grants *grantSet
}
