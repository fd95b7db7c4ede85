package server

import (
	"context"

	"go.uber.org/zap"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/textcut"
)

// DeleteSession erases one session on request, as retention deletes one (see
// [session.Store.Delete]): its readers and watchers end with NotFound
// (SESSION_DELETED) and the id is free again. Whoever may read the session may delete
// it: its owner while it keeps the scope it claimed the session in, or an operator of
// that scope (see [ActionReadSession]); a tenant's operator erases its tenant's
// sessions as it reads them, and nobody else learns whether the id is in use. A
// session that a batch or a tool set's resolution holds, or with a call open, is
// refused with FailedPrecondition (SESSION_IN_USE): nothing accepted is lost under a
// running batch. The session is
// deleted only while its owner is the one read before the caller was authorized: one
// deleted meanwhile (by retention, say) and claimed again by another identity is kept,
// with FailedPrecondition (SESSION_OWNER_CHANGED). The tool sets whose conditions read
// the deleted history end (see [registry.Registry.EndSessionToolSets]), and the
// authorizer forgets the owner ([Authorizer.ForgetSession]): its former owner reads,
// watches and deletes the free id as any identity that does not own it, until it
// claims it again.
func (s *Server) DeleteSession(ctx context.Context, req *toolsdv1.DeleteSessionRequest) (*toolsdv1.DeleteSessionResponse, error) {
	id := req.GetSessionId()
	if err := s.checkSessionID("session_id", id); err != nil {
		return nil, toStatus(s.log, err)
	}
	seen, err := s.ownerOf(ctx, id)
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionReadSession, "", id); err != nil {
		return nil, toStatus(s.log, err)
	}
	// The sets end, and the authorizer forgets the owner, before a batch may hold the id
	// again: a batch holding it first would run a tool the sets admitted in the id's
	// next session, and its claim could be forgotten with the former owner.
	n, err := s.sessions.Delete(ctx, id, seen, func() {
		s.reg.EndSessionToolSets(id)
		s.authz.ForgetSession(id)
	})
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	s.log.Info("session deleted", zap.String("session_id", textcut.Ellipsis(id, textcut.MaxLoggedID)),
		zap.String("identity", callerName(ctx)), zap.Int("events", n))
	return &toolsdv1.DeleteSessionResponse{EventsRemoved: uint64(n)}, nil
}

// ownerOf is session id's recorded owner, nil when it has none. Read before the caller
// is authorized, it is at least as old as the owner the authorization decided on: a
// session whose owner changed after it is not deleted (see [session.Store.Delete]).
func (s *Server) ownerOf(ctx context.Context, id string) (*session.Owner, error) {
	o, ok, err := s.sessions.Owner(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	return &o, nil
}
