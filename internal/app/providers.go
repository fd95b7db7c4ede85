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
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/pkg/provider"
)

// providerService exposes the broker as ProviderService.
type providerService struct {
	toolsdv1.UnimplementedProviderServiceServer
	b *broker.Broker
}

func (p providerService) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	return p.b.Connect(stream)
}

// registrationErrorCode names a registry failure for a provider's RegisterToolsResult.
func registrationErrorCode(err error) (string, string) {
	code := codes.InvalidArgument
	switch {
	case errors.Is(err, registry.ErrAlreadyExists):
		code = codes.AlreadyExists
	case errors.Is(err, registry.ErrLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, registry.ErrPinMismatch):
		code = codes.FailedPrecondition
	case errors.Is(err, registry.ErrNotOwner):
		code = codes.PermissionDenied
	}
	return status.Code(status.Error(code, "")).String(), err.Error()
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
