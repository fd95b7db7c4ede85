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
// opened the stream of ctx stops being accepted (see [auth.Identity.Expires]), and
// returns what disarms it; a credential without an expiry arms none. Streams are
// authenticated once, as they open: a watch, which lasts as long as its client keeps
// it, would otherwise go on reading its session with a token long expired.
func (s *Server) cutAtExpiry(ctx context.Context, cut func(cause error)) (stop func()) {
	id, ok := auth.FromContext(ctx)
	if !ok || id.Expires.IsZero() {
		return func() {}
	}
	cause := expiryCause(id)
	stopTimer := s.expiryTimer(id.Expires, func() { cut(cause) })
	return func() { stopTimer() }
}

// expiryCause is what ends a stream of id at [auth.Identity.Expires]: its client
// certificate, or its token, expired.
func expiryCause(id auth.Identity) error {
	at := id.Expires.UTC().Format(time.RFC3339)
	if id.Method == auth.MethodMTLS {
		return fmt.Errorf("%w (not valid after %s): connect again with a renewed certificate", errCertificateExpired, at)
	}
	return fmt.Errorf("%w (not accepted after %s): open the stream again with a fresh token", errTokenExpired, at)
}

// expired reports whether cause is one of [expiryCause]'s.
func expired(cause error) bool {
	return errors.Is(cause, errTokenExpired) || errors.Is(cause, errCertificateExpired)
}
