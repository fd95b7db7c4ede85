package relay

import "time"

// WithAcceptedHold makes s hold a single-call batch's accepted message for d, in place of
// toolsd's default, and returns s.
func (s *Server) WithAcceptedHold(d time.Duration) *Server {
	s.hold = d
	return s
}
