package app

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/rpcerr"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// providerService exposes the broker as ProviderService.
type providerService struct {
	toolsdv1.UnimplementedProviderServiceServer
	b *broker.Broker
	// admit, if set, refuses a stream whose identity may not register tools anywhere
	// (it would only take one of the limited provider places), or that would take more
	// places than its identity has; release gives the place back when the stream ends.
	admit func(ctx context.Context) (release func(), err error)
}

func (p providerService) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	if p.admit != nil {
		release, err := p.admit(stream.Context())
		if err != nil {
			return err
		}
		defer release()
	}
	return p.b.Connect(stream)
}

// providerPlaces counts the provider streams of each identity confined to some scopes,
// so that one tenant cannot take every limits.max_providers place.
type providerPlaces struct {
	max int

	mu sync.Mutex
	n  map[string]int
}

// take claims one of identity's places; it reports false when identity has none left.
func (p *providerPlaces) take(identity string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[identity] >= p.max {
		return false
	}
	if p.n == nil {
		p.n = make(map[string]int)
	}
	p.n[identity]++
	return true
}

func (p *providerPlaces) give(identity string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[identity]--; p.n[identity] <= 0 {
		delete(p.n, identity)
	}
}

// admitProvider is providerService.admit with authorization on; shuttingDown is the
// broker's [broker.Broker.ShuttingDown].
func admitProvider(authz *auth.Authorizer, places *providerPlaces, shuttingDown func() error) func(context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		if _, err := authz.ScopeFilter(ctx, auth.Register); err != nil {
			return nil, rpcerr.Error(codes.PermissionDenied, rpcerr.Permission, err.Error())
		}
		if authz.Unconfined(ctx, auth.Register) {
			return func() {}, nil // the operator's providers are bound by max_providers alone
		}
		// Shutdown before the place, as the broker checks it before max_providers: a
		// stream refused for both is told to go elsewhere (SHUTTING_DOWN), not to back
		// off (LIMIT_EXCEEDED), while the streams that are ending still hold its places.
		if err := shuttingDown(); err != nil {
			return nil, err
		}
		id, _ := auth.FromContext(ctx)
		if !places.take(id.Name) {
			return nil, rpcerr.Errorf(codes.ResourceExhausted, rpcerr.LimitExceeded,
				"this identity has %d provider streams connected, the limit (limits.max_providers_per_identity)", places.max)
		}
		return func() { places.give(id.Name) }, nil
	}
}

// registerGuard is the broker's tenancy check of a provider's register and unregister
// messages: may the provider register in scope? A malformed scope is left to the
// registry, which refuses it before anything else (INVALID_ARGUMENT), as the unary
// RegisterTool answers INVALID_SCOPE whoever sends it: the grants match no malformed
// scope, so judged by them "tenant-a/.." was PERMISSION_DENIED and "tenant-a/x y"
// INVALID_ARGUMENT.
func registerGuard(authz *auth.Authorizer) broker.ScopeGuard {
	return func(ctx context.Context, scope string) error {
		if registry.ValidateScope(scope) != nil {
			return nil
		}
		return authz.AllowRegister(ctx, scope)
	}
}

// hookService exposes the hook hub as HookService.
type hookService struct {
	toolsdv1.UnimplementedHookServiceServer
	h *hook.Hub
}

func (s hookService) Connect(stream toolsdv1.HookService_ConnectServer) error {
	return s.h.Connect(stream)
}

// registrationErrorCode names a registry failure for a provider's RegisterToolsResult,
// as the gRPC code name the protocol documents (RESOURCE_EXHAUSTED, not
// ResourceExhausted): the broker's own rejections use the same spelling.
func registrationErrorCode(err error) (string, string) {
	code := "INVALID_ARGUMENT"
	switch {
	case errors.Is(err, registry.ErrAlreadyExists):
		code = "ALREADY_EXISTS"
	case errors.Is(err, registry.ErrLimit):
		code = "RESOURCE_EXHAUSTED"
	case errors.Is(err, registry.ErrPinMismatch):
		code = "FAILED_PRECONDITION"
	case errors.Is(err, registry.ErrNotOwner):
		code = "PERMISSION_DENIED"
	case errors.Is(err, tool.ErrUnknownTool):
		code = "NOT_FOUND"
	}
	return code, err.Error()
}

// runExample runs the bundled example provider against this process until ctx ends.
func (a *App) runExample(ctx context.Context) error {
	p := provider.New("example", provider.WithLogger(a.log.Named("example-provider")),
		provider.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	p.Add(exampletools.Tools(a.example)...)
	err := p.Run(ctx, a.Addr())
	if err != nil && ctx.Err() == nil {
		a.log.Error("example provider stopped", zap.Error(err))
	}
	return nil
}
