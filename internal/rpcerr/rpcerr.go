// Package rpcerr builds the statuses that toolsd's stream handlers (ProviderService and
// HookService Connect) end with: a code, a message and, as on every other toolsd RPC
// error, a google.rpc.ErrorInfo in domain toolsd.v1 whose stable reason clients match
// on instead of the message text.
package rpcerr

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every toolsd status.
const Domain = "toolsd.v1"

// Reasons of the stream handlers' statuses (shared with the unary RPCs' vocabulary).
const (
	BadRequest    = "BAD_REQUEST"       // a protocol error: no hello first, an invalid hello
	LimitExceeded = "LIMIT_EXCEEDED"    // too many providers or hooks connected
	Permission    = "PERMISSION_DENIED" // the identity may not open this stream
	ShuttingDown  = "SHUTTING_DOWN"     // toolsd is stopping
	StreamClosing = "STREAM_CLOSING"    // the stream ended while it was being admitted
	SlowClient    = "SLOW_CLIENT"       // the peer stopped reading its stream
	HelloTimeout  = "HELLO_TIMEOUT"     // no hello within the limit
	// FirstMessageTimeout: an ExecuteBatch stream sent no batch within the limit.
	FirstMessageTimeout = "FIRST_MESSAGE_TIMEOUT"
)

// Error is a status error with code, msg and an ErrorInfo naming reason.
func Error(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// Errorf is [Error] with a formatted message.
func Errorf(code codes.Code, reason, format string, args ...any) error {
	return Error(code, reason, fmt.Sprintf(format, args...))
}
