package server

import (
	"sync"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// maxCachedProjections bounds [projectionCache]: a few scopes and tool sets are hot at
// any time, and an evicted projection is simply converted again.
const maxCachedProjections = 64

// projectionCache keeps the wire form of schema projections by fingerprint, so a
// Schemas call on a large scope does not convert every schema again. A fingerprint is
// a hash of exactly the schemas it names (the registry computes both together), so an
// entry is never stale: a changed visible set has a new fingerprint. The cached
// messages are shared by concurrent responses and never modified; gRPC only reads them.
type projectionCache struct {
	mu    sync.Mutex
	byFP  map[string][]*toolsdv1.ToolSchema
	order []string // insertion order, for eviction
}

// proto returns schemas, whose fingerprint is fp, as wire messages.
func (c *projectionCache) proto(schemas []tool.Schema, fp string) []*toolsdv1.ToolSchema {
	if fp == "" {
		return schemasToProto(schemas)
	}
	c.mu.Lock()
	out, ok := c.byFP[fp]
	c.mu.Unlock()
	if ok {
		return out
	}
	out = schemasToProto(schemas)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byFP[fp]; ok {
		return prev
	}
	if c.byFP == nil {
		c.byFP = make(map[string][]*toolsdv1.ToolSchema)
	}
	if len(c.order) == maxCachedProjections {
		delete(c.byFP, c.order[0])
		c.order = append(c.order[:0], c.order[1:]...)
	}
	c.byFP[fp] = out
	c.order = append(c.order, fp)
	return out
}
