package server

import (
	"cmp"
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

// maxQuarantinedPerPage bounds a ListQuarantined page, which maxPageBytes bounds too: a
// registration lists a description and parameter schema of up to 8 KiB and
// limits.max_schema_bytes (about 72 KiB in all by default), so a few dozen are over
// gRPC's default 4 MiB receive limit, and limits.max_tools_per_scope holds a thousand
// in each scope.
const maxQuarantinedPerPage = 100

// ListQuarantined lists the held-back registrations in the scopes the caller may
// restrict, sorted by scope and name, a page at a time; one that may restrict nowhere
// is denied.
func (s *Server) ListQuarantined(ctx context.Context, req *toolsdv1.ListQuarantinedRequest) (*toolsdv1.ListQuarantinedResponse, error) {
	mine, err := s.authz.ScopeFilter(ctx, ActionRestrict)
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	tokens := pageTokens{rpc: "ListQuarantined", key: s.pageKey}
	after, err := decodeQuarantinedToken(tokens, req.GetPageToken())
	if err != nil {
		return nil, toStatus(s.log, badField("page_token", "%v", err))
	}
	size := pageSize(req.GetPageSize(), maxQuarantinedPerPage)
	entries := after.rest(s.reg.Quarantined())
	out := &toolsdv1.ListQuarantinedResponse{}
	// Room is kept for the next page token (tag, length and token).
	budget := maxPageBytes - maxPageToken - entryOverhead
	used := 0
	var last *registry.Entry
	for _, e := range entries {
		if !mine(e.Scope()) {
			continue
		}
		if len(out.Tools) == size {
			out.NextPageToken = tokens.sign(quarantinedToken{Scope: last.Scope(), Name: last.Name()})
			break
		}
		q := s.quarantinedToProto(e)
		n := proto.Size(q) + entryOverhead
		// A page holds at least one registration, however large, so every page lists
		// something.
		if len(out.Tools) > 0 && used+n > budget {
			out.NextPageToken = tokens.sign(quarantinedToken{Scope: last.Scope(), Name: last.Name()})
			break
		}
		out.Tools = append(out.Tools, q)
		used += n
		last = e
	}
	return out, nil
}

func (s *Server) quarantinedToProto(e *registry.Entry) *toolsdv1.QuarantinedTool {
	pinned, _ := s.reg.PinnedHash(e.Scope(), e.Name())
	return &toolsdv1.QuarantinedTool{
		Scope:       e.Scope(),
		Tool:        schemasToProto([]tool.Schema{e.Schema()})[0],
		ContentHash: e.Hash(),
		PinnedHash:  pinned,
		ProviderId:  e.Owner(),
	}
}

// quarantinedToken is where the next ListQuarantined page starts: after the
// registration of Name in Scope (a scope holds one of a name at most), whether it is
// still held back or not. The zero token, of no name, starts at the beginning.
type quarantinedToken struct {
	Scope string `json:"s,omitempty"`
	Name  string `json:"n"`
}

// decodeQuarantinedToken reads ListQuarantined's page token s (see [pageTokens]).
func decodeQuarantinedToken(tokens pageTokens, s string) (quarantinedToken, error) {
	var t quarantinedToken
	if err := tokens.open(s, &t); err != nil {
		return quarantinedToken{}, err
	}
	if s != "" && t.Name == "" {
		return quarantinedToken{}, tokens.bad()
	}
	return t, nil
}

// rest is the entries, sorted as [registry.Registry.Quarantined] sorts them, after t's
// registration; all of them for the zero token.
func (t quarantinedToken) rest(entries []*registry.Entry) []*registry.Entry {
	i, found := slices.BinarySearchFunc(entries, t, func(e *registry.Entry, t quarantinedToken) int {
		return cmp.Or(cmp.Compare(e.Scope(), t.Scope), cmp.Compare(e.Name(), t.Name))
	})
	if found {
		i++
	}
	return entries[i:]
}
