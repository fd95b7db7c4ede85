package app

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/pkg/provider"
)

// providerService exposes the broker as ProviderService.
type providerService struct {
	toolsdv1.UnimplementedProviderServiceServer
	b *broker.Broker
	// admit, if set, refuses a stream whose identity may not register tools anywhere:
	// it would only take one of the limited provider places.
	admit func(ctx context.Context) error
}

func (p providerService) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	if p.admit != nil {
		if err := p.admit(stream.Context()); err != nil {
			return status.Error(codes.PermissionDenied, err.Error())
		}
	}
	return p.b.Connect(stream)
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
