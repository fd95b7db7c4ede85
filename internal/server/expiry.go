package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolsd/toolsd/internal/auth"
)

// afterTime is the default [Deps.ExpiryTimer]: [time.AfterFunc] for the time until at.
func afterTime(at time.Time, f func()) (stop func() bool) {
	return time.AfterFunc(time.Until(at), f).Stop
}

// cutAtExpiry arms a timer that calls cut with the cause once the credential that
// opened the stream of ctx stops being accepted (see [auth.Identity.Expires]), or the
// client certificate of the connection it came on does (see
// [auth.Identity.CertExpires]), whichever comes first, and returns what disarms it; a
// credential without an expiry arms none. Streams are authenticated once, as they
// open: a watch, which lasts as long as its client keeps it, would otherwise go on
// reading its session with a token long expired.
func (s *Server) cutAtExpiry(ctx context.Context, cut func(cause error)) (stop func()) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return func() {}
	}
	at, cause := expiry(id)
	if at.IsZero() {
		return func() {}
	}
	stopTimer := s.expiryTimer(at, func() { cut(cause) })
	return func() { stopTimer() }
}

// expiry is when a stream of id is to end (zero: never), and the cause it ends with:
// its client certificate, or its token, expired.
func expiry(id auth.Identity) (time.Time, error) {
	at, cert := id.Expires, id.Method == auth.MethodMTLS
	if !id.CertExpires.IsZero() && (at.IsZero() || id.CertExpires.Before(at)) {
		at, cert = id.CertExpires, true
	}
	if at.IsZero() {
		return at, nil
	}
	when := at.UTC().Format(time.RFC3339)
	if cert {
		return at, fmt.Errorf("%w (not valid after %s): connect again with a renewed certificate", errCertificateExpired, when)
	}
	return at, fmt.Errorf("%w (not accepted after %s): open the stream again with a fresh token", errTokenExpired, when)
}

// expired reports whether cause is one of the causes [expiry] gives.
func expired(cause error) bool {
	return errors.Is(cause, errTokenExpired) || errors.Is(cause, errCertificateExpired)
}
