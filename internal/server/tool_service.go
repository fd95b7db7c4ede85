package server

import (
	"context"
	"errors"
	"fmt"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/textcut"
)

// RegisterTool binds a tool to a connected provider.
func (s *Server) RegisterTool(ctx context.Context, req *toolsdv1.RegisterToolRequest) (*toolsdv1.RegisterToolResponse, error) {
	if req.GetTool() == nil {
		return nil, toStatus(s.log, badField("tool", "is required"))
	}
	if req.GetProviderId() == "" {
		return nil, toStatus(s.log, badField("provider_id", "is required: a tool needs a connected provider to run it"))
	}
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionRegister, req.GetScope(), ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.checkProvider(ctx, req.GetProviderId()); err != nil {
		return nil, toStatus(s.log, err)
	}
	def, err := broker.DefinitionFromProto(req.GetTool())
	if err != nil {
		field := "tool"
		var de *broker.DefinitionError
		if errors.As(err, &de) {
			field += "." + de.Field
		}
		return nil, toStatus(s.log, badField(field, "%v", err))
	}
	entry, err := s.reg.Register(req.GetScope(), def, req.GetProviderId())
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	// The provider may have gone away while we registered: its cleanup may have run
	// before the registration landed, so remove what it can no longer serve.
	if !s.broker.Connected(req.GetProviderId()) {
		s.reg.RemoveOwner(req.GetProviderId())
		return nil, toStatus(s.log, providerNotConnected(req.GetProviderId()))
	}
	return &toolsdv1.RegisterToolResponse{ContentHash: entry.Hash(), Quarantined: s.reg.IsQuarantined(entry)}, nil
}

// checkProvider refuses to act on a provider stream that is gone or that another
// identity opened: binding a tool to someone else's stream would send this caller's
// scope's calls into that provider's process (across tenants, too).
func (s *Server) checkProvider(ctx context.Context, providerID string) error {
	pctx, ok := s.broker.StreamContext(providerID)
	if !ok {
		return providerNotConnected(providerID)
	}
	caller, callerKnown := auth.FromContext(ctx)
	owner, ownerKnown := auth.FromContext(pctx) //nolint:contextcheck // read-only: the identity that opened the stream
	if callerKnown != ownerKnown || caller.Name != owner.Name {
		return errNotYourProvider
	}
	return nil
}

// providerNotConnected names the provider_id that no open Connect stream holds.
func providerNotConnected(providerID string) error {
	return fmt.Errorf("%w: provider_id %q has no open Connect stream (an id lives as long as its stream)",
		errProviderNotConnected, textcut.Ellipsis(providerID, textcut.MaxLoggedID))
}

// UnregisterTool removes one registration.
func (s *Server) UnregisterTool(ctx context.Context, req *toolsdv1.UnregisterToolRequest) (*toolsdv1.UnregisterToolResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(s.log, badField("name", "is required"))
	}
	action := ActionRegister
	if req.GetProviderId() == "" {
		action = ActionRestrict // removing anyone's tool is an operator action
	}
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, action, req.GetScope(), ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	if action == ActionRegister {
		if err := s.checkProvider(ctx, req.GetProviderId()); err != nil {
			return nil, toStatus(s.log, err)
		}
	}
	if err := s.reg.Unregister(req.GetScope(), req.GetName(), req.GetProviderId()); err != nil {
		return nil, toStatus(s.log, err)
	}
	return &toolsdv1.UnregisterToolResponse{}, nil
}

// Schemas returns the visible schemas of a scope or a tool set.
func (s *Server) Schemas(ctx context.Context, req *toolsdv1.SchemasRequest) (*toolsdv1.SchemasResponse, error) {
	ts, err := s.schemaSource(ctx, req.GetScope(), req.GetToolSetId())
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	if ts != nil {
		schemas, fp := ts.Schemas()
		return &toolsdv1.SchemasResponse{Tools: s.projections.proto(schemas, fp), Fingerprint: fp}, nil
	}
	schemas, fp := s.reg.Schemas(req.GetScope())
	return &toolsdv1.SchemasResponse{Tools: s.projections.proto(schemas, fp), Fingerprint: fp}, nil
}

// schemaSource checks a request for the schemas of scope, or of the tool set id names
// ("" for none), as Schemas and WatchSchemas take it, and authorizes the caller in ctx
// to read them; it returns the tool set, nil without one.
func (s *Server) schemaSource(ctx context.Context, scope, id string) (*registry.ToolSet, error) {
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(scope); err != nil {
		return nil, err
	}
	if err := s.authz.Authorize(ctx, ActionReadTools, scope, ""); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, nil
	}
	ts, err := s.reg.ToolSetOf(id, callerName(ctx))
	if err != nil {
		return nil, err
	}
	if ts.Scope() != scope {
		return nil, badField("tool_set_id", "tool set %q was not resolved for scope %q", id, scope)
	}
	return ts, nil
}

// Restrict places a mask on a scope's inherited tools.
func (s *Server) Restrict(ctx context.Context, req *toolsdv1.RestrictRequest) (*toolsdv1.RestrictResponse, error) {
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionRestrict, req.GetScope(), ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	id, err := s.reg.Restrict(req.GetScope(), req.GetAllow(), req.GetDeny())
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	return &toolsdv1.RestrictResponse{RestrictionId: id}, nil
}

// Unrestrict lifts a restriction.
func (s *Server) Unrestrict(ctx context.Context, req *toolsdv1.UnrestrictRequest) (*toolsdv1.UnrestrictResponse, error) {
	if req.GetRestrictionId() == "" {
		return nil, toStatus(s.log, badField("restriction_id", "is required"))
	}
	// Authorized against the scope the restriction masks. An unknown id is checked
	// against the global scope "", so only an operator of that scope learns that an id
	// does not exist (ids are random: that tells nothing about other tenants).
	scope, _ := s.reg.RestrictionScope(req.GetRestrictionId())
	if err := s.authz.Authorize(ctx, ActionRestrict, scope, ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.reg.Unrestrict(req.GetRestrictionId()); err != nil {
		return nil, toStatus(s.log, err)
	}
	return &toolsdv1.UnrestrictResponse{}, nil
}

// ApproveQuarantined makes one held-back registration visible.
func (s *Server) ApproveQuarantined(ctx context.Context, req *toolsdv1.ApproveQuarantinedRequest) (*toolsdv1.ApproveQuarantinedResponse, error) {
	if req.GetContentHash() == "" {
		return nil, toStatus(s.log, badField("content_hash", "is required: approve the definition ListQuarantined showed"))
	}
	if req.GetName() == "" {
		return nil, toStatus(s.log, badField("name", "is required"))
	}
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionRestrict, req.GetScope(), ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.reg.ApproveQuarantined(req.GetScope(), req.GetName(), req.GetContentHash()); err != nil {
		return nil, toStatus(s.log, err)
	}
	return &toolsdv1.ApproveQuarantinedResponse{}, nil
}

// maxModelFieldBytes bounds each field of a step's model selection. Conditions match
// regular expressions over them, and CEL charges a match only after it ran: a literal
// pattern of the bounded size takes tens of microseconds per byte of text, so a megabyte
// of model name would hold a resolution for minutes.
const maxModelFieldBytes = 256

// ResolveToolSet evaluates conditional tools for one step.
func (s *Server) ResolveToolSet(ctx context.Context, req *toolsdv1.ResolveToolSetRequest) (*toolsdv1.ResolveToolSetResponse, error) {
	// The scope is checked before the caller's rights in it: a malformed scope is the
	// same mistake whoever sends it (INVALID_SCOPE, as ExecuteBatch answers).
	if err := registry.ValidateScope(req.GetScope()); err != nil {
		return nil, toStatus(s.log, err)
	}
	// Optional here, but held to the limit of every other session id: one longer names
	// no session, and would be looked up in the owner table and the store.
	if id := req.GetSessionId(); id != "" {
		if err := s.checkSessionID("session_id", id); err != nil {
			return nil, toStatus(s.log, err)
		}
	}
	// Before the caller's rights too, as ExecuteBatch checks a call id's length.
	m := req.GetModel()
	if err := checkModel(m); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionReadTools, req.GetScope(), req.GetSessionId()); err != nil {
		return nil, toStatus(s.log, err)
	}
	env := registry.ConditionEnv{
		Owner:     callerName(ctx),
		SessionID: req.GetSessionId(),
		Turn:      req.GetTurn(),
		Step:      req.GetStep(),
		Model:     registry.ModelSelection{Provider: m.GetProvider(), Model: m.GetModel(), ReasoningEffort: m.GetReasoningEffort()},
	}
	if req.GetSessionId() != "" {
		// Held from before the history is read until the set is made: a DeleteSession
		// meanwhile is refused (SESSION_IN_USE) rather than end the session's sets before
		// this one exists, leaving it live on a history that is gone.
		release, err := s.sessions.Hold(ctx, req.GetSessionId())
		if err != nil {
			return nil, toStatus(s.log, err)
		}
		defer release()
		sum, err := s.sessions.Summary(ctx, req.GetSessionId())
		if err != nil {
			return nil, toStatus(s.log, err)
		}
		// Checked again after the read, as ReadSession does for every page: the id may
		// have been free when authorized and claimed by another identity since (or
		// deleted by retention and claimed again), and its history is then that
		// identity's; a claim comes before its events, so a read holding them fails.
		if err := s.authz.Authorize(ctx, ActionReadTools, req.GetScope(), req.GetSessionId()); err != nil {
			return nil, toStatus(s.log, err)
		}
		env.History = sum
	}
	ts, err := s.reg.ResolveToolSet(ctx, req.GetScope(), env)
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	schemas, fp := ts.Schemas()
	return &toolsdv1.ResolveToolSetResponse{ToolSetId: ts.ID(), Tools: s.projections.proto(schemas, fp), Fingerprint: fp}, nil
}

// checkModel holds each field of a step's model selection to maxModelFieldBytes.
func checkModel(m *toolsdv1.ModelSelection) error {
	for _, f := range [...]struct{ name, v string }{
		{"model.provider", m.GetProvider()}, {"model.model", m.GetModel()}, {"model.reasoning_effort", m.GetReasoningEffort()},
	} {
		if len(f.v) > maxModelFieldBytes {
			return badField(f.name, "is %d bytes, over the limit of %d", len(f.v), maxModelFieldBytes)
		}
	}
	return nil
}

// callerName is the authenticated identity in ctx, "" without one.
func callerName(ctx context.Context) string {
	if id, ok := auth.FromContext(ctx); ok {
		return id.Name
	}
	return ""
}

// ReleaseToolSet disposes a tool set.
func (s *Server) ReleaseToolSet(ctx context.Context, req *toolsdv1.ReleaseToolSetRequest) (*toolsdv1.ReleaseToolSetResponse, error) {
	if req.GetToolSetId() == "" {
		return nil, toStatus(s.log, badField("tool_set_id", "is required"))
	}
	// Only the set's owner, while it may still read the set's scope, may end it.
	ts, err := s.reg.ToolSetOf(req.GetToolSetId(), callerName(ctx))
	if err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionReadTools, ts.Scope(), ""); err != nil {
		return nil, toStatus(s.log, err)
	}
	if err := s.reg.ReleaseToolSet(req.GetToolSetId()); err != nil {
		return nil, toStatus(s.log, err)
	}
	return &toolsdv1.ReleaseToolSetResponse{}, nil
}
