package main

import (
	"context"
	"slices"
	"sync"
)

// Target and probe names.
const (
	nameRelay         = "relay"
	nameToolsd        = "toolsd"
	nameToolsdDurable = "toolsd-durable"
	nameToolsdJournal = "toolsd-journal"
	nameMCP           = "mcp"
	nameProbes        = "probes"
)

// knownNames lists every selectable part in report order.
func knownNames() []string {
	return []string{nameRelay, nameToolsd, nameToolsdDurable, nameToolsdJournal, nameMCP, nameProbes}
}

// probeResults are the toolsd-only measurements; nil means not measured.
type probeResults struct {
	Schemas10kP50us   *float64
	IdleStreamBytes   *float64
	InflightCallBytes *float64
}

// probeFunc runs the toolsd-only probes against fresh toolsd instances. One probe's
// failure does not stop the others: the results hold those measured, the error says
// which failed.
type probeFunc func(ctx context.Context, c config) (probeResults, error)

var (
	mu       sync.Mutex
	targets  []Target
	roles    = map[string]roleFunc{}
	probes   probeFunc
	cleanups []func()
)

func registerTarget(ts ...Target) {
	mu.Lock()
	defer mu.Unlock()
	targets = append(targets, ts...)
	slices.SortStableFunc(targets, func(a, b Target) int {
		return slices.Index(knownNames(), a.Name()) - slices.Index(knownNames(), b.Name())
	})
}

func registerRole(name string, f roleFunc) {
	mu.Lock()
	defer mu.Unlock()
	roles[name] = f
}

func registerProbes(f probeFunc) {
	mu.Lock()
	defer mu.Unlock()
	probes = f
}

// registerCleanup runs f when the harness exits normally (e.g. removing a built binary).
func registerCleanup(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	mu.Lock()
	fs := cleanups
	cleanups = nil
	mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
