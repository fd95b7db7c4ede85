// Package auth owns who a toolsd caller is and what it may do.
//
// Authentication ([Authenticator]) turns a gRPC request into an [Identity]: the verified
// client certificate of an mTLS connection (its spiffe:// URI SAN, else its CN), or an
// `authorization: Bearer <token>` header checked against a static token file (only
// SHA-256 hashes are kept, compared in constant time) or verified as a JWT against a
// local JWKS file. Authorization ([Authorizer]) checks that identity against the
// configured grants: roles (agent, provider, hook, operator) over scope globs, plus
// session ownership so that one agent never reads another's session.
//
// With no authentication configured everything is allowed and every caller is
// "anonymous": plaintext on loopback is the default deployment, and [WarnIfExposed]
// says so loudly when the listener is reachable from elsewhere.
//
// This package must never fetch anything over the network (no JWKS URLs, no `jku`/`x5u`
// headers: keys come only from the local JWKS file), never log or forward a caller's
// credentials (the interceptors strip the authorization header from the context they
// hand on, see [StripCredentials]), and never import the server, registry or broker:
// they call it through its small API.
package auth
