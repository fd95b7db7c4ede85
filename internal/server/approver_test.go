package server

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/tool"
)

// batchHandler serves ExecuteBatch with a test's handler.
type batchHandler struct {
	toolsdv1.UnimplementedToolServiceServer
	handle func(batchStream) error
}

func (h batchHandler) ExecuteBatch(stream batchStream) error { return h.handle(stream) }

// openBatch serves handle over bufconn and opens an ExecuteBatch stream to it from a
// client with a fixed 64 KiB flow-control window: a client that does not read never
// makes room. Everything is stopped when the test ends.
func openBatch(t *testing.T, handle func(batchStream) error) toolsdv1.ToolService_ExecuteBatchClient {
	t.Helper()
	g := grpc.NewServer()
	toolsdv1.RegisterToolServiceServer(g, batchHandler{handle: handle})
	lis := bufconn.Listen(1 << 20)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	t.Cleanup(func() {
		cancel()
		_ = conn.Close()
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The handler starts with the stream's first message.
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s"}}}); err != nil {
		t.Fatal(err)
	}
	return stream
}

func decision(callID string, approved bool, reason string) *toolsdv1.ExecuteBatchRequest {
	return &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{
		CallId: callID, Approved: approved, Reason: reason,
	}}}
}

// recvApproval reads the stream until an approval request, failing the test at its end.
func recvApproval(t *testing.T, stream toolsdv1.ToolService_ExecuteBatchClient) *toolsdv1.ApprovalRequest {
	t.Helper()
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv() = %v before an approval request", err)
		}
		if r := m.GetApprovalRequest(); r != nil {
			return r
		}
	}
}

// drain reads the stream to its end.
func drain(t *testing.T, stream toolsdv1.ToolService_ExecuteBatchClient) {
	t.Helper()
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("Recv() = %v, want the stream's end", err)
			}
			return
		}
	}
}

type approveResult struct {
	d   tool.ApprovalDecision
	err error
}

// TestDecisionBeforeItsRequestIsRefused: a decision read while its call's approval
// request is registered but not yet handed to the stream (here it waits behind results
// the client has not read) was sent before the client could have seen the request: it
// is refused as a decision for a call not awaiting one, and the call waits on for the
// answer to the request once the client has it.
func TestDecisionBeforeItsRequestIsRefused(t *testing.T) {
	registered, earlyRead, lateRead := make(chan struct{}), make(chan bool, 1), make(chan bool, 1)
	approved := make(chan approveResult, 1)
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		out := newOutbox(stream, 8, time.Hour, nil, func(error) {}, false)
		a := newStreamApprover(out)
		// The first message uses up the stream's write quota; the sender's Send of the
		// second waits for a client that reads nothing, and the request queues behind.
		big := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: &toolsdv1.ToolResult{CallId: "c0", Content: strings.Repeat("x", 256<<10)}}}
		small := &toolsdv1.ExecuteBatchResponse{Msg: &toolsdv1.ExecuteBatchResponse_Result{Result: &toolsdv1.ToolResult{CallId: "c1", Content: "y"}}}
		if err := out.put(big); err != nil {
			return err
		}
		if err := out.put(small); err != nil {
			return err
		}
		results := make(chan approveResult, 1)
		go func() {
			d, err := a.Approve(stream.Context(), tool.ApprovalRequest{Call: &tool.Call{CallID: "ask", Index: 2, Name: "rm"}, Reason: "deletes"})
			results <- approveResult{d, err}
		}()
		if err := waitFor("the approval registered", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			_, ok := a.pending["ask"]
			return ok
		}); err != nil {
			return err
		}
		close(registered)
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		earlyRead <- a.resolve(m.GetApproval(), nil)
		if m, err = stream.Recv(); err != nil {
			return err
		}
		lateRead <- a.resolve(m.GetApproval(), nil)
		approved <- <-results
		return out.close()
	})
	<-registered
	if err := stream.Send(decision("ask", true, "early")); err != nil {
		t.Fatal(err)
	}
	if <-earlyRead {
		t.Error("resolve(a decision read before its request was sent) = true, want false (no call awaits it yet)")
	}
	if req := recvApproval(t, stream); req.GetCallId() != "ask" {
		t.Fatalf("approval request for %q, want ask", req.GetCallId())
	}
	if err := stream.Send(decision("ask", false, "asked")); err != nil {
		t.Fatal(err)
	}
	if !<-lateRead {
		t.Error("resolve(the decision answering the request) = false, want true")
	}
	if r := <-approved; r.err != nil || r.d != (tool.ApprovalDecision{Approved: false, Reason: "asked"}) {
		t.Errorf("Approve() = %+v, %v; want the answer to the request (not approved, \"asked\")", r.d, r.err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	drain(t, stream)
}

// TestDecisionForAWithdrawnRequestIsRefused: each approval request carries its own id,
// and a decision naming an earlier request of its call (withdrawn since: its wait was
// cancelled, and the call asked again) is refused as a stray, where it would have been
// taken for the answer to the request the client has not answered yet. A decision
// without an id (an older client) answers whichever request of its call awaits one.
func TestDecisionForAWithdrawnRequestIsRefused(t *testing.T) {
	seen := make(chan struct{})
	staleRead, freshRead, bareRead := make(chan bool, 1), make(chan bool, 1), make(chan bool, 1)
	first, second, third := make(chan approveResult, 1), make(chan approveResult, 1), make(chan approveResult, 1)
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		out := newOutbox(stream, 8, time.Hour, nil, func(error) {}, false)
		a := newStreamApprover(out)
		ask := func(ctx context.Context, results chan<- approveResult) {
			d, err := a.Approve(ctx, tool.ApprovalRequest{Call: &tool.Call{CallID: "ask", Index: 0, Name: "rm"}, Reason: "deletes"})
			results <- approveResult{d, err}
		}
		resolveNext := func(read chan<- bool) error {
			m, err := stream.Recv()
			if err != nil {
				return err
			}
			read <- a.resolve(m.GetApproval(), nil)
			return nil
		}
		// The first request's wait ends (cancelled here, as a timeout would end it) once
		// the client has it, and the call is asked again.
		ctx, cancel := context.WithCancel(stream.Context())
		go ask(ctx, first)
		select {
		case <-seen:
		case <-stream.Context().Done():
			cancel()
			<-first
			return stream.Context().Err()
		}
		cancel()
		if r := <-first; r.err == nil {
			return errors.New("the cancelled request was answered")
		}
		go ask(stream.Context(), second)
		if err := resolveNext(staleRead); err != nil {
			return err
		}
		if err := resolveNext(freshRead); err != nil {
			return err
		}
		go ask(stream.Context(), third)
		if err := resolveNext(bareRead); err != nil {
			return err
		}
		return out.close()
	})
	req1 := recvApproval(t, stream)
	close(seen)
	req2 := recvApproval(t, stream)
	if req1.GetRequestId() == 0 || req2.GetRequestId() == 0 || req1.GetRequestId() == req2.GetRequestId() {
		t.Errorf("request ids %d then %d for the call asked twice, want two different ids, neither 0", req1.GetRequestId(), req2.GetRequestId())
	}
	stale := decision("ask", true, "stale")
	stale.GetApproval().RequestId = req1.GetRequestId()
	if err := stream.Send(stale); err != nil {
		t.Fatal(err)
	}
	if <-staleRead {
		t.Error("resolve(a decision naming the withdrawn request) = true, want false (a stray)")
	}
	fresh := decision("ask", false, "asked again")
	fresh.GetApproval().RequestId = req2.GetRequestId()
	if err := stream.Send(fresh); err != nil {
		t.Fatal(err)
	}
	if !<-freshRead {
		t.Error("resolve(the decision naming the request awaiting one) = false, want true")
	}
	if r := <-second; r.err != nil || r.d != (tool.ApprovalDecision{Approved: false, Reason: "asked again"}) {
		t.Errorf("Approve() asked again = %+v, %v; want the answer naming its request (not approved, \"asked again\")", r.d, r.err)
	}
	if req3 := recvApproval(t, stream); req3.GetRequestId() == req2.GetRequestId() || req3.GetRequestId() == req1.GetRequestId() {
		t.Errorf("request id %d for the third request, want one not used before", req3.GetRequestId())
	}
	if err := stream.Send(decision("ask", true, "bare")); err != nil {
		t.Fatal(err)
	}
	if !<-bareRead {
		t.Error("resolve(a decision without a request id) = false, want true (it answers the call's request)")
	}
	if r := <-third; r.err != nil || r.d != (tool.ApprovalDecision{Approved: true, Reason: "bare"}) {
		t.Errorf("Approve() answered without a request id = %+v, %v; want (approved, \"bare\")", r.d, r.err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	drain(t, stream)
}

// TestSecondApprovalOfAWaitingCallIsRefused: an approval asked for a call that already
// awaits one is refused at once, and the first request keeps its place: the client's
// answer to it decides it. The second used to replace the first in the pending set,
// so the answer to the first was refused as a stray and the first waited until its
// wait ended.
func TestSecondApprovalOfAWaitingCallIsRefused(t *testing.T) {
	seen := make(chan struct{})
	read := make(chan bool, 1)
	firstOut, secondOut := make(chan approveResult, 1), make(chan approveResult, 1)
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		out := newOutbox(stream, 8, time.Hour, nil, func(error) {}, false)
		a := newStreamApprover(out)
		first, second := make(chan approveResult, 1), make(chan approveResult, 1)
		ask := func(results chan<- approveResult) {
			d, err := a.Approve(stream.Context(), tool.ApprovalRequest{Call: &tool.Call{CallID: "ask", Index: 0, Name: "rm"}, Reason: "deletes"})
			results <- approveResult{d, err}
		}
		go ask(first)
		select {
		case <-seen:
		case <-stream.Context().Done():
			a.closeSide()
			firstOut <- <-first
			secondOut <- approveResult{}
			return stream.Context().Err()
		}
		go ask(second)
		// The second has returned, or has taken the first's place.
		err := waitFor("the second approval to return or register", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(second) > 0 || a.pending["ask"] == nil || a.pending["ask"].id != 1
		})
		if err == nil {
			var m *toolsdv1.ExecuteBatchRequest
			if m, err = stream.Recv(); err == nil {
				read <- a.resolve(m.GetApproval(), nil)
			}
		}
		for err == nil {
			_, err = stream.Recv()
		}
		a.closeSide() // ends a wait left without an answer
		// A safety net: a wait whose entry was replaced never ends.
		stuck := time.NewTimer(30 * time.Second)
		defer stuck.Stop()
		for _, r := range []struct{ in, out chan approveResult }{{first, firstOut}, {second, secondOut}} {
			select {
			case res := <-r.in:
				r.out <- res
			case <-stuck.C:
				r.out <- approveResult{err: errors.New("Approve() never returned")}
			}
		}
		if errors.Is(err, io.EOF) {
			return out.close()
		}
		return err
	})
	req := recvApproval(t, stream)
	close(seen)
	answer := decision("ask", true, "first")
	answer.GetApproval().RequestId = req.GetRequestId()
	if err := stream.Send(answer); err != nil {
		t.Fatal(err)
	}
	if !<-read {
		t.Error("resolve(the answer to the first request) = false, want true")
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	drain(t, stream)
	if r := <-firstOut; r.err != nil || r.d != (tool.ApprovalDecision{Approved: true, Reason: "first"}) {
		t.Errorf("first Approve() = %+v, %v; want the answer to its request (approved, \"first\")", r.d, r.err)
	}
	if r := <-secondOut; !errors.Is(r.err, errAlreadyAwaiting) {
		t.Errorf("second Approve() while the first waits = %+v, %v; want %v", r.d, r.err, errAlreadyAwaiting)
	}
}

// waitFor waits for cond, giving up with an error after a generous deadline.
func waitFor(what string, cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestRequestIdsInSendOrder: approval requests reach the client numbered 1, 2, 3, … in
// the order they are sent, as README says, whichever of the batch's calls asked first.
// The id was given out when a call's wait was registered and the request queued after,
// so a call that registered first and was queued second (here held between the two)
// reached the client with id 1 after the other call's request 2.
func TestRequestIdsInSendOrder(t *testing.T) {
	answered := make(chan []approveResult, 1)
	stream := openBatch(t, func(stream batchStream) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		out := newOutbox(stream, 8, time.Hour, nil, func(error) {}, false)
		a := newStreamApprover(out)
		held, release := make(chan struct{}), make(chan struct{})
		a.registered = func(callID string) {
			if callID == "first" {
				close(held)
				<-release
			}
		}
		results := make([]chan approveResult, 2)
		for i, id := range []string{"first", "second"} {
			results[i] = make(chan approveResult, 1)
			go func() {
				d, err := a.Approve(stream.Context(), tool.ApprovalRequest{Call: &tool.Call{CallID: id, Index: i, Name: "rm"}, Reason: "deletes"})
				results[i] <- approveResult{d, err}
			}()
			if i == 0 {
				<-held
			}
		}
		// The second request is queued, and sent, while the first is held.
		if err := waitFor("the second request to be sent", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			w := a.pending["second"]
			return w != nil && w.asked
		}); err != nil {
			close(release)
			a.closeSide()
			return err
		}
		close(release)
		for range 2 {
			m, err := stream.Recv()
			if err != nil {
				return err
			}
			a.resolve(m.GetApproval(), nil)
		}
		answered <- []approveResult{<-results[0], <-results[1]}
		return out.close()
	})
	var ids []uint64
	for _, want := range []string{"second", "first"} {
		req := recvApproval(t, stream)
		if req.GetCallId() != want {
			t.Fatalf("approval request for %q, want %q", req.GetCallId(), want)
		}
		ids = append(ids, req.GetRequestId())
		answer := decision(want, true, "")
		answer.GetApproval().RequestId = req.GetRequestId()
		if err := stream.Send(answer); err != nil {
			t.Fatal(err)
		}
	}
	if ids[0] != 1 || ids[1] != 2 {
		t.Errorf("request ids in the order sent = %v, want [1 2]", ids)
	}
	for i, r := range <-answered {
		if r.err != nil || !r.d.Approved {
			t.Errorf("Approve() %d = %+v, %v; want approved by the answer naming its request", i, r.d, r.err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	drain(t, stream)
}
