package auth

import (
	"net"
	"strings"

	"go.uber.org/zap"
)

// WarnIfExposed logs a warning when addr listens beyond loopback without authentication
// (anyone who can reach it could then register tools, run calls and read sessions), or
// with authentication but without TLS (bearer tokens, arguments and results cross the
// network in clear). It does not refuse to start, since a private network or a sidecar
// may be the guard.
func WarnIfExposed(addr string, authEnabled, tlsOn bool, log *zap.Logger) {
	if isLoopback(addr) || authEnabled && tlsOn {
		return
	}
	if log == nil {
		log = zap.NewNop()
	}
	if !authEnabled {
		log.Warn("listening on a non-loopback address without authentication: anyone who can reach it may register tools, execute calls and read sessions; configure auth (tls.client_ca_file, token_file or jwks_file) and grants",
			zap.String("addr", addr))
		return
	}
	log.Warn("listening on a non-loopback address without TLS: bearer tokens, arguments and results cross the network in clear; configure tls.cert_file and tls.key_file",
		zap.String("addr", addr))
}

// WarnIfPprofExposed logs a warning when the admin listener that serves /debug/pprof/
// listens beyond loopback: profiles and goroutine stacks show what toolsd is doing,
// and a profile request costs CPU.
func WarnIfPprofExposed(addr string, log *zap.Logger) {
	if isLoopback(addr) || log == nil {
		return
	}
	log.Warn("debug.pprof serves /debug/pprof/ on a non-loopback admin address: anyone who can reach it may read profiles and goroutine stacks",
		zap.String("admin_addr", addr))
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
