package server

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Sweeps at the limit are rationed so that a flood of connections at the limit cannot
// make every Accept check all those held: a connection about to be refused sweeps only
// if the last sweep is sweepInterval old, or if the refusals since it, this one
// included, number at least one per sweepShare connections held (each refusal then
// pays for at most sweepShare checks).
const (
	sweepInterval = 50 * time.Millisecond
	sweepShare    = 64
)

// ConnLimiter is a listener with at most limit of the connections it accepted open at
// once; see [LimitConnections].
type ConnLimiter struct {
	net.Listener
	max     int
	refused func()

	mu sync.Mutex
	// held are the accepted connections not yet seen closed: each holds a place.
	held map[net.Conn]struct{}
	// lastSweep and skipped (refusals without a sweep since) ration the sweeps.
	lastSweep time.Time
	skipped   int
}

// LimitConnections returns l with at most limit of the connections it accepts open at
// once. A connection over the limit is accepted and closed at once, so that its client
// sees the connection end rather than wait in the kernel's backlog (as under
// netutil.LimitListener), refused (if not nil) is called, and Accept goes on to the
// next. Each accepted connection holds goroutines and buffers before it sends a single
// RPC, and the health service needs no credentials, so without this anyone who could
// connect could exhaust memory.
//
// Accept returns the accepted connections themselves, unwrapped: gRPC reads a
// *net.TCPConn through its pooled non-blocking reader and sets TCP_USER_TIMEOUT on it,
// which it does for no wrapper. So a connection's close is not seen as it happens: the
// limiter keeps the connections it accepted and, at the limit, sweeps them (see
// [ConnLimiter.Open]) before it refuses one; whoever closed them (the client gone,
// keepalive, a failed handshake, a bad preface, shutdown), their places come back.
// Sweeps at the limit are rationed under a flood: a connection closed just after one
// is seen at the next (a scrape, or a refusal once 50 ms passed or the refusals since
// paid for it: every refusal sweeps for a limit up to 64); a client arriving at the
// limit in between is refused though a place is free. A closed connection not yet swept keeps its socket's bookkeeping (a
// few hundred bytes; at most limit of them). A connection from no OS socket (bufconn's)
// is wrapped to note its close, having no raw read path to lose.
func LimitConnections(l net.Listener, limit int, refused func()) *ConnLimiter {
	return &ConnLimiter{Listener: l, max: limit, refused: refused, held: make(map[net.Conn]struct{})}
}

// Accept returns the next connection that finds a place, closing those that do not.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if _, ok := c.(syscall.Conn); !ok {
			c = &closeNotingConn{Conn: c}
		}
		if l.hold(c) {
			return c, nil
		}
		if l.refused != nil {
			l.refused()
		}
		_ = c.Close()
	}
}

// hold gives c a place if one is free, sweeping first at the limit when the sweeps'
// ration allows it, and reports whether it did.
func (l *ConnLimiter) hold(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) >= l.max && l.sweepDue() {
		l.sweep()
	}
	if len(l.held) >= l.max {
		l.skipped++
		return false
	}
	l.held[c] = struct{}{}
	return true
}

// sweepDue reports whether a connection about to be refused may sweep.
func (l *ConnLimiter) sweepDue() bool {
	return time.Since(l.lastSweep) >= sweepInterval || (l.skipped+1)*sweepShare >= len(l.held)
}

// sweep forgets the held connections that were closed. Its caller holds l.mu.
func (l *ConnLimiter) sweep() {
	for c := range l.held {
		if isClosed(c) {
			delete(l.held, c)
		}
	}
	l.lastSweep, l.skipped = time.Now(), 0
}

// Open sweeps the held connections and returns how many are open (for the
// toolsd_server_connections gauge, at each scrape).
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	return len(l.held)
}

// isClosed reports whether c was closed: the runtime refuses to lend a closed socket's
// descriptor, and lending an open one to a function that does nothing leaves it as it
// was (no system call, its deadlines and pending reads untouched).
func isClosed(c net.Conn) bool {
	if n, ok := c.(*closeNotingConn); ok {
		return n.closed.Load()
	}
	raw, err := c.(syscall.Conn).SyscallConn()
	return err != nil || raw.Control(func(uintptr) {}) != nil
}

// closeNotingConn is an accepted connection from no OS socket, which notes its close.
type closeNotingConn struct {
	net.Conn
	closed atomic.Bool
}

// Close closes the connection and notes it.
func (c *closeNotingConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}
