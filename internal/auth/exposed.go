package auth

import (
	"net"
	"strings"

	"go.uber.org/zap"
)

// WarnIfExposed logs a warning when addr listens beyond loopback without authentication:
// anyone who can reach it could then register tools, run calls and read sessions. It
// does not refuse to start, since a private network or a sidecar may be the guard.
func WarnIfExposed(addr string, authEnabled bool, log *zap.Logger) {
	if authEnabled || isLoopback(addr) {
		return
	}
	if log == nil {
		log = zap.NewNop()
	}
	log.Warn("listening on a non-loopback address without authentication: anyone who can reach it may register tools, execute calls and read sessions; configure auth (tls.client_ca_file, token_file or jwks_file) and grants",
		zap.String("addr", addr))
}

// isLoopback reports whether addr's host can only be reached from this machine. An
// empty or unspecified host (":50151", "0.0.0.0", "[::]") listens everywhere; a host
// name other than localhost is treated as exposed, since it is never resolved here.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
