package auth

import (
	"errors"
	"fmt"

	"github.com/toolsd/toolsd/internal/textcut"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrPermissionDenied wraps every authorization denial (a [*DeniedError]).
	ErrPermissionDenied = errors.New("auth: permission denied")
	// ErrUnauthenticated wraps every authentication failure (a [*CredentialError]).
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrInvalidConfig wraps every configuration or key-file problem found by [New].
	ErrInvalidConfig = errors.New("auth: invalid configuration")
	// ErrOwnershipFull is returned when a new session cannot be claimed because the
	// in-memory ownership table is at its cap (see [WithMaxOwnedSessions]).
	ErrOwnershipFull = errors.New("auth: session ownership table is full")
)

// Stable reasons of authentication failures; they travel in the status details.
const (
	ReasonMissingCredentials = "MISSING_CREDENTIALS"
	ReasonInvalidToken       = "INVALID_TOKEN"
	ReasonTokenExpired       = "TOKEN_EXPIRED"
	ReasonInvalidCertificate = "INVALID_CERTIFICATE"
	// ReasonCertificateExpired refuses an RPC on a connection whose client certificate
	// has expired since its handshake, and ends a stream that the certificate opened
	// once it expires (a new connection with it fails its TLS handshake).
	ReasonCertificateExpired = "CERTIFICATE_EXPIRED"
)

// CredentialError explains why a request could not be authenticated. Its message never
// contains the credential itself.
type CredentialError struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Detail is a human explanation ("token expired at ...").
	Detail string
}

func (e *CredentialError) Error() string { return "auth: " + e.Detail }

// Unwrap makes every CredentialError match [ErrUnauthenticated].
func (e *CredentialError) Unwrap() error { return ErrUnauthenticated }

func invalidToken(format string, args ...any) error {
	return &CredentialError{Reason: ReasonInvalidToken, Detail: "invalid token: " + fmt.Sprintf(format, args...)}
}

// DeniedError is an authorization denial naming who was refused what.
type DeniedError struct {
	Identity string
	Action   Action
	// Scope is the scope acted on ("" is global); SessionID is set for session actions.
	Scope     string
	SessionID string
	// Why, when set, adds the rule that refused ("the session belongs to another identity").
	Why string
}

func (e *DeniedError) Error() string {
	var msg string
	if e.Action == ReadSession || (e.SessionID != "" && e.Why != "") {
		msg = fmt.Sprintf("auth: identity %q may not %s session %q", e.Identity, e.Action.verb(), clipEchoed(e.SessionID))
	} else {
		msg = fmt.Sprintf("auth: identity %q may not %s scope %q", e.Identity, e.Action.verb(), clipEchoed(e.Scope))
	}
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// maxEchoedBytes bounds the scope and session id a denial repeats: longer than any
// valid one, so only a caller's oversized request is cut (its scope is checked for
// validity after authorization, and may be megabytes).
const maxEchoedBytes = 1024

func clipEchoed(s string) string { return textcut.Ellipsis(s, maxEchoedBytes) }

// Unwrap makes every DeniedError match [ErrPermissionDenied].
func (e *DeniedError) Unwrap() error { return ErrPermissionDenied }

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
