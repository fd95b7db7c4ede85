package server

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/rpcerr"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// errorTable maps domain errors to gRPC codes and stable reasons. It is walked in order
// with errors.Is, so wrapped errors keep their mapping; put specific errors first.
var errorTable = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{context.Canceled, codes.Canceled, "CANCELED"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{errBadRequest, codes.InvalidArgument, "BAD_REQUEST"},
	{errShuttingDown, codes.Unavailable, "SHUTTING_DOWN"},
	{errFirstMessageTimeout, codes.DeadlineExceeded, rpcerr.FirstMessageTimeout},
	{errProviderNotConnected, codes.FailedPrecondition, "PROVIDER_NOT_CONNECTED"},
	{errToolSetStepMismatch, codes.FailedPrecondition, "TOOL_SET_STEP_MISMATCH"},
	{errSlowClient, codes.ResourceExhausted, "SLOW_CLIENT"},
	{errTokenExpired, codes.Unauthenticated, auth.ReasonTokenExpired},
	{errCertificateExpired, codes.Unauthenticated, auth.ReasonCertificateExpired},
	{errRequestTooLarge, codes.ResourceExhausted, "REQUEST_TOO_LARGE"},
	{errBatchLimit, codes.ResourceExhausted, rpcerr.LimitExceeded},
	{errWatchLimit, codes.ResourceExhausted, rpcerr.LimitExceeded},
	{errHealthWatchLimit, codes.ResourceExhausted, rpcerr.LimitExceeded},
	{registry.ErrInvalidScope, codes.InvalidArgument, "INVALID_SCOPE"},
	{registry.ErrInvalidName, codes.InvalidArgument, "INVALID_TOOL_NAME"},
	{registry.ErrInvalidSchema, codes.InvalidArgument, "INVALID_SCHEMA"},
	{registry.ErrInvalidRestriction, codes.InvalidArgument, "INVALID_RESTRICTION"},
	{registry.ErrInvalidCondition, codes.InvalidArgument, "INVALID_CONDITION"},
	{registry.ErrAlreadyExists, codes.AlreadyExists, "TOOL_EXISTS"},
	{registry.ErrLimit, codes.ResourceExhausted, "LIMIT_EXCEEDED"},
	{registry.ErrPinMismatch, codes.FailedPrecondition, "DEFINITION_CHANGED"},
	{registry.ErrActivationFailed, codes.FailedPrecondition, string(tool.CodeToolActivationFailed)},
	{registry.ErrBusy, codes.Aborted, "REGISTRY_BUSY"},
	{registry.ErrUnknownRestriction, codes.NotFound, "UNKNOWN_RESTRICTION"},
	{registry.ErrNotQuarantined, codes.NotFound, "NOT_QUARANTINED"},
	{auth.ErrPermissionDenied, codes.PermissionDenied, "PERMISSION_DENIED"},
	{auth.ErrOwnershipFull, codes.ResourceExhausted, "SESSION_OWNERSHIP_FULL"},
	{registry.ErrNotOwner, codes.PermissionDenied, "NOT_OWNER"},
	{tool.ErrUnknownTool, codes.NotFound, string(tool.CodeUnknownTool)},
	{tool.ErrToolSetGone, codes.NotFound, "TOOL_SET_GONE"},
	{session.ErrTooLarge, codes.ResourceExhausted, "EVENT_TOO_LARGE"},
	{session.ErrClosed, codes.Unavailable, "SESSION_STORE_CLOSED"},
	{session.ErrDeleted, codes.NotFound, "SESSION_DELETED"},
	{session.ErrNotFound, codes.NotFound, "SESSION_NOT_FOUND"},
	{session.ErrInUse, codes.FailedPrecondition, "SESSION_IN_USE"},
	{session.ErrOwnerChanged, codes.FailedPrecondition, "SESSION_OWNER_CHANGED"},
	{errSessionRecreated, codes.FailedPrecondition, "SESSION_RECREATED"},
	{session.ErrStopped, codes.Unavailable, "SESSION_STORE_STOPPED"},
	{errCorruptLog, codes.DataLoss, "SESSION_LOG_CORRUPT"},
}

// Server-layer sentinels.
var (
	errBadRequest           = errors.New("server: bad request")
	errShuttingDown         = errors.New("server: toolsd is shutting down")
	errFirstMessageTimeout  = errors.New("server: the stream's first message did not come in time")
	errProviderNotConnected = errors.New("server: provider not connected")
	errSlowClient           = errors.New("server: client stopped reading results")
	errTokenExpired         = errors.New("server: the token that opened the stream expired")
	errCertificateExpired   = errors.New("server: the client certificate that opened the stream expired")
	errRequestTooLarge      = errors.New("server: request too large")
	errBatchLimit           = errors.New("server: too many batches in flight")
	errWatchLimit           = errors.New("server: too many watches (WatchSession and WatchSchemas together)")
	errHealthWatchLimit     = errors.New("server: too many health watches")
	errToolSetStepMismatch  = errors.New("server: tool set resolved for another step")
	errSessionRecreated     = errors.New("server: the session is not the expected epoch's: retention deleted it and it was created again, or expect_epoch is not one toolsd sent")
	errCorruptLog           = errors.New("server: the session log holds a damaged record (toolsd's log says where)")
	errNotYourProvider      = fmt.Errorf("%w: server: the provider stream belongs to another identity", auth.ErrPermissionDenied)
)

// fieldError is a request validation failure naming the offending field.
type fieldError struct {
	field, desc string
}

func (e *fieldError) Error() string { return e.field + ": " + e.desc }
func (e *fieldError) Unwrap() error { return errBadRequest }

func badField(field, format string, args ...any) error {
	return &fieldError{field: field, desc: fmt.Sprintf(format, args...)}
}

// toStatus translates an error leaving a handler. Nothing leaves as Unknown: an error
// the table does not know is logged and becomes a plain Internal.
func toStatus(log *zap.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, session.ErrStopped):
		// Its cause, the failed write's (or the damage a commit met), names the store's
		// file: the store logged it as it stopped. A store that damage stopped as it
		// committed is stopped for every session, which its own status says.
		err = session.ErrStopped
	case errors.Is(err, session.ErrCorrupt):
		// Its text names files and offsets: for the operator's log, not the client.
		log.Error("session log damaged", zap.Error(err))
		err = errCorruptLog
	}
	for _, row := range errorTable {
		if !errors.Is(err, row.err) {
			continue
		}
		st := status.New(row.code, err.Error())
		details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: row.reason, Domain: rpcerr.Domain}}
		var fe *fieldError
		if errors.As(err, &fe) {
			details = append(details, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.field, Description: fe.desc}}})
		}
		var ve *registry.ValidationError
		if errors.As(err, &ve) {
			br := &errdetails.BadRequest{}
			for _, v := range ve.Violations {
				br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Pointer, Description: v.Message})
			}
			details = append(details, br)
		}
		if withDetails, derr := st.WithDetails(details...); derr == nil {
			st = withDetails
		}
		return st.Err()
	}
	log.Error("unmapped error", zap.Error(err))
	return status.Error(codes.Internal, "internal error")
}
