package relay

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// Server is the relay: ToolService.ExecuteBatch for agents, ProviderService.Connect for
// the provider. It has no other state than the provider connection and two counters.
type Server struct {
	toolsdv1.UnimplementedToolServiceServer
	toolsdv1.UnimplementedProviderServiceServer

	hub     hub
	batches atomic.Uint64
	seq     atomic.Uint64
	hold    time.Duration // how long a single-call batch's accepted waits for its result
}

// NewServer returns a relay with no provider connected, holding a single-call batch's
// accepted message as long as toolsd's default limits.accepted_hold.
func NewServer() *Server { return &Server{hold: acceptedHold()} }

// Register adds both services to g.
func (s *Server) Register(g *grpc.Server) {
	toolsdv1.RegisterToolServiceServer(g, s)
	toolsdv1.RegisterProviderServiceServer(g, s)
}

// ExecuteBatch relays one batch: accepted, one result per call in model order, settled.
func (s *Server) ExecuteBatch(stream toolsdv1.ToolService_ExecuteBatchServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	batch := req.GetBatch()
	if batch == nil || len(batch.GetCalls()) == 0 {
		return status.Error(codes.InvalidArgument, "relay: first message must be a non-empty batch")
	}
	p, err := s.hub.current()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	n := len(batch.GetCalls())
	first := s.seq.Add(uint64(2*n)) - uint64(2*n) + 1
	acc := accepted(s.batches.Add(1), first, n)
	if n > 1 {
		if err := stream.Send(acc); err != nil {
			return err
		}
		acc = nil
	}
	ids := make([]uint64, n)
	waits := make([]<-chan *toolsdv1.ExecuteResult, n)
	// toolsd sends every call a deadline (its tool timeout, 60 s by default) and the time
	// left until it; the no-op provider reads neither.
	end := time.Now().Add(time.Minute)
	deadline, timeout := timestamppb.New(end), durationpb.New(time.Until(end))
	settled := false
	defer func() {
		if !settled {
			for _, id := range ids {
				p.forget(id)
			}
		}
	}()
	for i, c := range batch.GetCalls() {
		ids[i], waits[i], err = p.execute(&toolsdv1.ExecuteRequest{
			CallId: c.GetCallId(), SessionId: batch.GetSessionId(), Scope: batch.GetScope(),
			Tool: c.GetName(), ArgumentsJson: c.GetArgumentsJson(), Deadline: deadline, Timeout: timeout,
			Turn: batch.GetTurn(), Step: batch.GetStep(), Attempt: 1,
		})
		if err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
	}
	ctx := stream.Context()
	var ready *toolsdv1.ExecuteResult
	if acc != nil {
		// One call: accepted waits for the result, as toolsd's (limits.accepted_hold),
		// so a quick call costs its agent one write.
		if ready, err = holdAccepted(stream, s.hold, acc, waits[0]); err != nil {
			return err
		}
	}
	for i, c := range batch.GetCalls() {
		r := ready // the single call's result, if the hold took it
		if r == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case r = <-waits[i]:
			}
		}
		callSeq := first + uint64(i)
		if err := stream.Send(result(c, i, r, callSeq, callSeq+uint64(n))); err != nil {
			return err
		}
	}
	settled = true
	return stream.Send(&toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Settled{
		Settled: &toolsdv1.BatchSettled{Results: uint32(n)},
	}})
}

// holdAccepted sends a single-call batch's accepted message once its result is ready
// (and returns that result) or once hold has passed (and returns nil).
func holdAccepted(stream toolsdv1.ToolService_ExecuteBatchServer, hold time.Duration, acc *toolsdv1.ExecuteBatchResponse, wait <-chan *toolsdv1.ExecuteResult) (*toolsdv1.ExecuteResult, error) {
	t := time.NewTimer(hold)
	defer t.Stop()
	var r *toolsdv1.ExecuteResult
	select {
	case <-stream.Context().Done():
		return nil, stream.Context().Err()
	case <-t.C:
	case r = <-wait:
	}
	return r, stream.Send(acc)
}

func accepted(batch, first uint64, n int) *toolsdv1.ExecuteBatchResponse {
	seqs := make([]uint64, n)
	for i := range seqs {
		seqs[i] = first + uint64(i)
	}
	return &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Accepted{
		Accepted: &toolsdv1.BatchAccepted{BatchId: "b" + strconv.FormatUint(batch, 10), CallSeqs: seqs},
	}}
}

func result(c *toolsdv1.ToolCall, i int, r *toolsdv1.ExecuteResult, callSeq, seq uint64) *toolsdv1.ExecuteBatchResponse {
	tr := &toolsdv1.ToolResult{
		CallId: c.GetCallId(), Index: uint32(i), Content: string(r.GetContent()),
		ValueJson: string(r.GetValueJson()), Seq: seq, CallSeq: callSeq,
	}
	if r.GetIsError() {
		msg := string(r.GetErrorMessage())
		tr.IsError, tr.Content, tr.ValueJson = true, "Error: "+msg, ""
		tr.Error = &toolsdv1.ToolError{Code: "TOOL_ERROR", Message: msg, Tool: c.GetName()}
	}
	return &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: tr}}
}

// Connect serves one provider: hello → welcome, then results and (accept-all) tool
// registrations until the stream ends.
func (s *Server) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	if req.GetHello() == nil {
		return status.Error(codes.InvalidArgument, "relay: first message must be hello")
	}
	p := newProviderConn(stream)
	err = s.welcome(p, "p"+strconv.FormatUint(s.seq.Add(1), 10))
	defer func() {
		s.hub.detach(p)
		p.close()
	}()
	if err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.handle(p, req); err != nil {
			return fmt.Errorf("relay: %w", err)
		}
	}
}

// welcome makes p the current provider and sends its welcome, both under p's send lock:
// a provider that has its welcome already takes calls (the harness starts agents once
// the relay provider is welcomed), and no call is sent to it ahead of the welcome.
func (s *Server) welcome(p *providerConn, id string) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	s.hub.attach(p)
	return p.stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{
		Welcome: &toolsdv1.ProviderWelcome{ProviderId: id},
	}})
}

func (s *Server) handle(p *providerConn, req *toolsdv1.ProviderServiceConnectRequest) error {
	switch m := req.Msg.(type) {
	case *toolsdv1.ProviderServiceConnectRequest_Result:
		p.deliver(m.Result)
	case *toolsdv1.ProviderServiceConnectRequest_Register:
		return p.send(registered(m.Register.GetRef(), len(m.Register.GetTools()), func(i int) string {
			return m.Register.GetTools()[i].GetName()
		}))
	case *toolsdv1.ProviderServiceConnectRequest_Unregister:
		return p.send(registered(m.Unregister.GetRef(), len(m.Unregister.GetNames()), func(i int) string {
			return m.Unregister.GetNames()[i]
		}))
	}
	return nil
}

// registered accepts every tool: the relay keeps no registry.
func registered(ref uint64, n int, name func(int) string) *toolsdv1.ProviderServiceConnectResponse {
	st := make([]*toolsdv1.ToolRegistrationStatus, n)
	for i := range st {
		st[i] = &toolsdv1.ToolRegistrationStatus{Name: name(i)}
	}
	return &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_RegisterResult{
		RegisterResult: &toolsdv1.RegisterToolsResult{Ref: ref, Tools: st},
	}}
}
