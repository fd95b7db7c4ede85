// Package streamgate admits the handlers of long-lived callback streams (provider and
// hook Connect streams) until shutdown, and lets shutdown end them and wait for them.
// It also times those streams' Sends ([SendWatch]), with the allowance for a slow link
// ([DrainRate]) that the batch stream's outbox uses too.
package streamgate

import (
	"strings"
	"sync"
)

// Gate is safe for concurrent use. The zero value is not usable: see [New].
type Gate struct {
	quit     chan struct{} // closed when shutdown begins
	handlers sync.WaitGroup

	mu      sync.Mutex
	closing bool
	reason  string
}

// New returns an open gate.
func New() *Gate { return &Gate{quit: make(chan struct{})} }

// Enter admits one handler unless shutdown has begun. An admitted handler calls
// [Gate.Leave] when it returns.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.handlers.Add(1)
	return true
}

// Leave marks an admitted handler as returned.
func (g *Gate) Leave() { g.handlers.Done() }

// Quit is closed when shutdown begins: handlers select on it to end their streams.
func (g *Gate) Quit() <-chan struct{} { return g.quit }

// Closing reports whether shutdown has begun.
func (g *Gate) Closing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closing
}

// Reason is the reason the first [Gate.Shutdown] gave, as valid UTF-8 (it goes into a
// protobuf string field).
func (g *Gate) Reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason
}

// Shutdown refuses new handlers, closes Quit and returns once every admitted handler
// has left. Later calls keep the first reason and only wait.
func (g *Gate) Shutdown(reason string) {
	g.mu.Lock()
	if !g.closing {
		g.closing = true
		g.reason = strings.ToValidUTF8(reason, "\uFFFD")
		close(g.quit)
	}
	g.mu.Unlock()
	g.handlers.Wait()
}
