package server

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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

// The bounds of a ListProviders page. A page is kept within maxProvidersPageBytes, a
// quarter of gRPC's default receive limit: limits.max_providers and
// max_tools_per_provider have no upper bound, and one provider's tools alone (a
// registration takes up to about 600 bytes) may be over it.
const (
	maxProvidersPerPage   = 100
	maxProvidersPageBytes = 1 << 20
	// maxListedIdentity cuts the identity shown, so a provider's entry without its
	// tools always fits in a page.
	maxListedIdentity = 1024
	// maxPageToken bounds a page token read: the tokens given are far shorter.
	maxPageToken = 2048
	// entryOverhead is what a repeated message field adds to an element's own size: its
	// tag and a length of up to three bytes (the page is under 2 MiB).
	entryOverhead = 4
	// pageMACBytes is how much of its HMAC-SHA256 a page token carries.
	pageMACBytes = 16
)

// errBadPageToken is a page token that ListProviders did not give.
var errBadPageToken = errors.New("is not a next_page_token that ListProviders gave")

// ListProviders lists the connected providers the caller may see (see providerFilter),
// oldest first, each with its registrations from the registry, a page at a time.
func (s *Server) ListProviders(ctx context.Context, req *toolsdv1.ListProvidersRequest) (*toolsdv1.ListProvidersResponse, error) {
	visible, err := s.providerFilter(ctx)
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	after, err := decodePageToken(s.pageKey, req.GetPageToken())
	if err != nil {
		return nil, toStatus(s.log, badField("page_token", "%v", err))
	}
	size := int(req.GetPageSize())
	if size == 0 || size > maxProvidersPerPage {
		size = maxProvidersPerPage
	}
	ps := s.broker.Providers()
	slices.SortFunc(ps, func(a, b broker.ProviderInfo) int {
		return providerPos(a).compare(providerPos(b))
	})
	pg := providersPage{resp: &toolsdv1.ListProvidersResponse{}, key: s.pageKey}
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

// providersPage fills one ListProviders page within maxProvidersPageBytes.
type providersPage struct {
	resp  *toolsdv1.ListProvidersResponse
	key   []byte  // signs the page token (see [pageToken.encode])
	bytes int     // the page's encoded size so far, overestimated by at most entryOverhead an entry
	last  pagePos // the last provider added
}

// add adds p's entry at position pos with tools (sorted), and reports whether the page
// may take more. An entry that does not fit whole is cut after the tools that do, and
// the page ends there with a token that continues it. An entry is cut before its first
// tool only on a page that holds others (it then starts the next page), so every page
// lists something: alone on a page, an entry with one tool fits.
func (pg *providersPage) add(p *toolsdv1.ConnectedProvider, pos pagePos, tools []registry.OwnedTool) bool {
	// Room is kept for the next page token (tag, length and token).
	budget := maxProvidersPageBytes - maxPageToken - entryOverhead
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
		pg.resp.NextPageToken = pageToken{pagePos: pagePos{At: pos.At, ID: pos.ID, Scope: prev.Scope, Name: prev.Name}, Mid: true}.encode(pg.key)
		return false
	}
	pg.resp.Providers = append(pg.resp.Providers, p)
	pg.bytes += entry
	pg.last = pos
	return true
}

// endAfter ends the page with a token that starts the next after provider pos.
func (pg *providersPage) endAfter(pos pagePos) {
	pg.resp.NextPageToken = pageToken{pagePos: pos}.encode(pg.key)
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

// pageToken is where the next page starts: after the provider of pagePos, or, with
// Mid, after the tool of pagePos within that provider. The zero token starts at the
// beginning.
type pageToken struct {
	pagePos
	Mid bool `json:"m,omitempty"`
}

// encode returns the token signed with key, the server's: a token is only read back
// by the server that gave it, so that one from another toolsd (a replica behind the
// same address, or this one before a restart) or made up is refused rather than read
// as a position among providers it never listed.
func (t pageToken) encode(key []byte) string {
	b, _ := json.Marshal(t) //nolint:errchkjson // strings and integers only
	return base64.RawURLEncoding.EncodeToString(append(pageMAC(key, b), b...))
}

func decodePageToken(key []byte, s string) (pageToken, error) {
	var t pageToken
	if s == "" {
		return t, nil
	}
	if len(s) > maxPageToken {
		return t, errBadPageToken
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < pageMACBytes || !hmac.Equal(b[:pageMACBytes], pageMAC(key, b[pageMACBytes:])) {
		return pageToken{}, errBadPageToken
	}
	if json.Unmarshal(b[pageMACBytes:], &t) != nil || (t.ID == "" && t.At == 0) {
		return pageToken{}, errBadPageToken
	}
	return t, nil
}

// pageMAC is the part of the HMAC-SHA256 of a page token's text b under key that the
// token carries.
func pageMAC(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)[:pageMACBytes]
}

// rest is the tools after t's tool, for the provider t was cut in.
func (t pageToken) rest(tools []registry.OwnedTool) []registry.OwnedTool {
	i, found := slices.BinarySearchFunc(tools, t.pagePos, func(o registry.OwnedTool, p pagePos) int {
		return cmp.Or(cmp.Compare(o.Scope, p.Scope), cmp.Compare(o.Name, p.Name))
	})
	if found { // (scope, name) is unique among a provider's tools
		i++
	}
	return tools[i:]
}
