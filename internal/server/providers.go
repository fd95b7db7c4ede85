package server

import (
	"cmp"
	"context"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/textcut"
)

// The bounds of a ListProviders page. A page is kept within maxPageBytes:
// limits.max_providers and max_tools_per_provider have no upper bound, and one
// provider's tools alone (a registration takes up to about 600 bytes) may be over it.
const (
	maxProvidersPerPage = 100
	// maxListedIdentity cuts the identity shown, so a provider's entry without its
	// tools always fits in a page.
	maxListedIdentity = 1024
)

// ListProviders lists the connected providers the caller may see (see providerFilter),
// oldest first, each with its registrations from the registry, a page at a time.
func (s *Server) ListProviders(ctx context.Context, req *toolsdv1.ListProvidersRequest) (*toolsdv1.ListProvidersResponse, error) {
	visible, err := s.providerFilter(ctx)
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	tokens := pageTokens{rpc: "ListProviders", key: s.pageKey}
	after, err := decodeProvidersToken(tokens, req.GetPageToken())
	if err != nil {
		return nil, toStatus(s.log, badField("page_token", "%v", err))
	}
	size := pageSize(req.GetPageSize(), maxProvidersPerPage)
	ps := s.broker.Providers()
	slices.SortFunc(ps, func(a, b broker.ProviderInfo) int {
		return providerPos(a).compare(providerPos(b))
	})
	pg := providersPage{resp: &toolsdv1.ListProvidersResponse{}, tokens: tokens}
	for _, p := range ps {
		pos := providerPos(p)
		c := pos.compare(after.pagePos)
		if c < 0 || (c == 0 && !after.Mid) {
			continue
		}
		tools := s.reg.Owned(p.ID)
		if !visible(tools) {
			continue
		}
		pctx, ok := s.broker.StreamContext(p.ID)
		if !ok { // gone since Providers
			continue
		}
		if len(pg.resp.Providers) == size {
			pg.endAfter(pg.last)
			break
		}
		if c == 0 {
			tools = after.rest(tools)
		}
		if !pg.add(providerToProto(pctx, p), pos, tools) { //nolint:contextcheck // read-only: the identity that opened the stream
			break
		}
	}
	return pg.resp, nil
}

// providerFilter returns which providers, by their registrations, the caller in ctx
// sees. It must be an operator somewhere (allowed ActionRestrict): an operator of every
// scope or of the global scope ([Authorizer.Unconfined]) sees every provider; one
// confined to some scopes (a tenant's) sees a provider only when it holds a
// registration and all of them are in those scopes. A provider's identity, in-flight
// count and tools would otherwise tell a tenant of another tenant's providers, or of
// one serving several tenants or the global scope; and one that registered nothing yet
// belongs to no scope to judge by.
func (s *Server) providerFilter(ctx context.Context) (func([]registry.OwnedTool) bool, error) {
	mine, err := s.authz.ScopeFilter(ctx, ActionRestrict)
	if err != nil {
		return nil, err
	}
	if s.authz.Unconfined(ctx, ActionRestrict) {
		return func([]registry.OwnedTool) bool { return true }, nil
	}
	return func(tools []registry.OwnedTool) bool {
		return len(tools) > 0 && !slices.ContainsFunc(tools, func(t registry.OwnedTool) bool { return !mine(t.Scope) })
	}, nil
}

// providerToProto is p's entry without its tools; pctx is its stream's context.
func providerToProto(pctx context.Context, p broker.ProviderInfo) *toolsdv1.ConnectedProvider {
	identity := ""
	if id, ok := auth.FromContext(pctx); ok {
		identity = textcut.Ellipsis(id.Name, maxListedIdentity)
	}
	return &toolsdv1.ConnectedProvider{
		ProviderId:  p.ID,
		Name:        p.Name,
		Version:     p.Version,
		Identity:    identity,
		ConnectedAt: timestamppb.New(p.ConnectedAt),
		InFlight:    clampUint32(p.InFlight),
		MaxInFlight: clampUint32(p.MaxInFlight),
	}
}

func clampUint32(n int) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }

// providersPage fills one ListProviders page within maxPageBytes.
type providersPage struct {
	resp   *toolsdv1.ListProvidersResponse
	tokens pageTokens // sign the page token
	bytes  int        // the page's encoded size so far, overestimated by at most entryOverhead an entry
	last   pagePos    // the last provider added
}

// add adds p's entry at position pos with tools (sorted), and reports whether the page
// may take more. An entry that does not fit whole is cut after the tools that do, and
// the page ends there with a token that continues it. An entry is cut before its first
// tool only on a page that holds others (it then starts the next page), so every page
// lists something: alone on a page, an entry with one tool fits.
func (pg *providersPage) add(p *toolsdv1.ConnectedProvider, pos pagePos, tools []registry.OwnedTool) bool {
	// Room is kept for the next page token (tag, length and token).
	budget := maxPageBytes - maxPageToken - entryOverhead
	entry := proto.Size(p) + entryOverhead
	first := len(pg.resp.Providers) == 0
	if !first && pg.bytes+entry > budget {
		pg.endAfter(pg.last)
		return false
	}
	for i, t := range tools {
		pt := &toolsdv1.ProviderTool{Scope: t.Scope, Name: t.Name, Quarantined: t.Quarantined}
		n := proto.Size(pt) + entryOverhead
		if pg.bytes+entry+n <= budget || (i == 0 && first) {
			p.Tools = append(p.Tools, pt)
			entry += n
			continue
		}
		if i == 0 {
			pg.endAfter(pg.last)
			return false
		}
		p.ToolsContinued = true
		pg.resp.Providers = append(pg.resp.Providers, p)
		prev := tools[i-1]
		pg.resp.NextPageToken = pg.tokens.sign(providersToken{pagePos: pagePos{At: pos.At, ID: pos.ID, Scope: prev.Scope, Name: prev.Name}, Mid: true})
		return false
	}
	pg.resp.Providers = append(pg.resp.Providers, p)
	pg.bytes += entry
	pg.last = pos
	return true
}

// endAfter ends the page with a token that starts the next after provider pos.
func (pg *providersPage) endAfter(pos pagePos) {
	pg.resp.NextPageToken = pg.tokens.sign(providersToken{pagePos: pos})
}

// pagePos is a place in the listing's order: a provider by its connection time (Unix
// nanoseconds) and id, and, within its tools, one by scope and name.
type pagePos struct {
	At    int64  `json:"t"`
	ID    string `json:"p"`
	Scope string `json:"s,omitempty"`
	Name  string `json:"n,omitempty"`
}

func providerPos(p broker.ProviderInfo) pagePos {
	return pagePos{At: p.ConnectedAt.UnixNano(), ID: p.ID}
}

// compare orders providers (the tool fields are ignored).
func (a pagePos) compare(b pagePos) int {
	return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.ID, b.ID))
}

// providersToken is where the next page starts: after the provider of pagePos, or, with
// Mid, after the tool of pagePos within that provider. The zero token starts at the
// beginning.
type providersToken struct {
	pagePos
	Mid bool `json:"m,omitempty"`
}

// decodeProvidersToken reads ListProviders' page token s (see [pageTokens]).
func decodeProvidersToken(tokens pageTokens, s string) (providersToken, error) {
	var t providersToken
	if err := tokens.open(s, &t); err != nil {
		return providersToken{}, err
	}
	if s != "" && t.ID == "" && t.At == 0 {
		return providersToken{}, tokens.bad()
	}
	return t, nil
}

// rest is the tools after t's tool, for the provider t was cut in.
func (t providersToken) rest(tools []registry.OwnedTool) []registry.OwnedTool {
	i, found := slices.BinarySearchFunc(tools, t.pagePos, func(o registry.OwnedTool, p pagePos) int {
		return cmp.Or(cmp.Compare(o.Scope, p.Scope), cmp.Compare(o.Name, p.Name))
	})
	if found { // (scope, name) is unique among a provider's tools
		i++
	}
	return tools[i:]
}
