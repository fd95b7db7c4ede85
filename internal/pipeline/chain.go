package pipeline

import (
	"context"

	"github.com/toolsd/toolsd/internal/tool"
)

// Handler runs the rest of a chain: the next interceptor, or the stage's body.
type Handler func(ctx context.Context, e *tool.Exec, t Tool) tool.Result

// Interceptor is one layer of a stage, with the shape of a gRPC server interceptor: it
// may act before calling next, replace ctx or the tool it passes on, inspect or replace
// the result next returns, or return without calling next at all.
type Interceptor func(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result

// ChainInterceptors composes interceptors into one, the first being the outermost:
// ChainInterceptors(a, b)(ctx, e, t, h) runs a, whose next runs b, whose next runs h.
// The pipeline's execute chain is composed once per config generation; a chain built
// here composes its layers on each call, which costs one closure per layer.
func ChainInterceptors(interceptors ...Interceptor) Interceptor {
	ics := append([]Interceptor(nil), interceptors...)
	return func(ctx context.Context, e *tool.Exec, t Tool, next Handler) tool.Result {
		return bind(ics, next)(ctx, e, t)
	}
}

// bind precomposes interceptors around a final handler, so running the chain allocates
// nothing per call.
func bind(interceptors []Interceptor, final Handler) Handler {
	h := final
	for i := len(interceptors) - 1; i >= 0; i-- {
		ic, next := interceptors[i], h
		h = func(ctx context.Context, e *tool.Exec, t Tool) tool.Result {
			return ic(ctx, e, t, next)
		}
	}
	return h
}
