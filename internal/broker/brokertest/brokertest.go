// Package brokertest runs a [broker.Broker] behind a real gRPC server on loopback, with
// an in-memory [Registrar], for tests of the broker, the provider SDK and providers. It
// is test support: it never runs in production.
package brokertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/tool"
)

// WaitTimeout bounds every wait in this package. It only catches a hang: a test that
// moves tens of MiB under the race detector on a loaded machine takes seconds.
const WaitTimeout = 30 * time.Second

// Errors of the [Registrar].
var (
	ErrTaken    = errors.New("brokertest: tool registered by another provider")
	ErrNotFound = errors.New("brokertest: tool not registered by this provider")
)

// Key names one registration.
type Key struct{ Scope, Name string }

// Registration is one stored tool.
type Registration struct {
	Def   tool.Definition
	Owner string
	Hash  string
}

// Registrar is an in-memory [broker.Registrar] that records what happened to it.
type Registrar struct {
	// Reject, when set, refuses a registration with the error it returns.
	Reject func(scope string, def tool.Definition) error
	// Hold, when set, reports an accepted registration as held back (quarantined).
	Hold func(scope string, def tool.Definition) bool

	mu      sync.Mutex
	tools   map[Key]Registration
	count   int
	removed []string
	changed chan struct{}
}

var _ broker.Registrar = (*Registrar)(nil)

// NewRegistrar returns an empty registrar.
func NewRegistrar() *Registrar {
	return &Registrar{tools: make(map[Key]Registration), changed: make(chan struct{})}
}

// Register implements [broker.Registrar].
func (r *Registrar) Register(scope string, def tool.Definition, owner string) (string, bool, error) {
	if r.Reject != nil {
		if err := r.Reject(scope, def); err != nil {
			return "", false, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := Key{scope, def.Name}
	if old, ok := r.tools[k]; ok && old.Owner != owner {
		return "", false, fmt.Errorf("%w: %q", ErrTaken, def.Name)
	}
	sum := sha256.Sum256([]byte(def.Name + "\x00" + def.Description + "\x00" + string(def.Parameters)))
	reg := Registration{Def: def, Owner: owner, Hash: hex.EncodeToString(sum[:])}
	r.tools[k] = reg
	r.count++
	r.notify()
	return reg.Hash, r.Hold != nil && r.Hold(scope, def), nil
}

// Unregister implements [broker.Registrar].
func (r *Registrar) Unregister(scope, name, owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := Key{scope, name}
	if old, ok := r.tools[k]; !ok || old.Owner != owner {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	delete(r.tools, k)
	r.notify()
	return nil
}

// RemoveOwner implements [broker.Registrar].
func (r *Registrar) RemoveOwner(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, reg := range r.tools {
		if reg.Owner == owner {
			delete(r.tools, k)
		}
	}
	r.removed = append(r.removed, owner)
	r.notify()
}

func (r *Registrar) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Lookup returns the registration of scope/name.
func (r *Registrar) Lookup(scope, name string) (Registration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.tools[Key{scope, name}]
	return reg, ok
}

// Registrations counts the successful Register calls so far.
func (r *Registrar) Registrations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Removed lists the owners passed to RemoveOwner, in order.
func (r *Registrar) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.removed...)
}

// WaitFor waits until cond holds, re-checking after every change; it fails tb after
// [WaitTimeout]. cond may call the registrar's methods.
func (r *Registrar) WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			tb.Fatalf("brokertest: timed out waiting for %s", what)
		}
	}
}

// Service adapts a broker to the generated ProviderService server interface.
func Service(b *broker.Broker) toolsdv1.ProviderServiceServer { return service{b: b} }

type service struct {
	toolsdv1.UnimplementedProviderServiceServer
	b *broker.Broker
}

func (s service) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	return s.b.Connect(stream)
}

// Server is a gRPC server on loopback that serves only ProviderService.
type Server struct {
	Broker    *broker.Broker
	Registrar *Registrar
	// Addr is the listening address, e.g. "127.0.0.1:40123".
	Addr string

	srv      *grpc.Server
	stopOnce sync.Once
	done     chan struct{}
}

// Start serves a new broker over reg on a fresh 127.0.0.1 port. The server stops at the
// end of the test.
func Start(tb testing.TB, reg *Registrar, opts ...broker.Option) *Server {
	tb.Helper()
	return StartAt(tb, "127.0.0.1:0", reg, opts...)
}

// StartAt is like [Start] on a given address (to restart a server where a previous one
// listened).
func StartAt(tb testing.TB, addr string, reg *Registrar, opts ...broker.Option) *Server {
	tb.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatalf("net.Listen(%q) = %v", addr, err)
	}
	return serve(tb, lis, reg, opts...)
}

// Listen returns a listener on a fresh 127.0.0.1 port, closed at the end of the test.
func Listen(tb testing.TB) net.Listener {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("net.Listen() = %v", err)
	}
	tb.Cleanup(func() { _ = lis.Close() })
	return lis
}

func serve(tb testing.TB, lis net.Listener, reg *Registrar, opts ...broker.Option) *Server {
	s := &Server{
		Broker:    broker.New(reg, opts...),
		Registrar: reg,
		Addr:      lis.Addr().String(),
		srv:       grpc.NewServer(),
		done:      make(chan struct{}),
	}
	toolsdv1.RegisterProviderServiceServer(s.srv, Service(s.Broker))
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis) // returns when Stop closes the listener
	}()
	tb.Cleanup(s.Stop)
	return s
}

// Stop shuts the broker down, then the server; it is idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.Broker.Shutdown("test server stopping")
		s.srv.Stop()
		<-s.done
	})
}

// Dial returns a client connection to the server, closed at the end of the test.
func (s *Server) Dial(tb testing.TB) *grpc.ClientConn {
	tb.Helper()
	return DialAddr(tb, s.Addr)
}

// DialAddr returns an insecure client connection to addr, closed at the end of the test.
func DialAddr(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("grpc.NewClient(%q) = %v", addr, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}
