package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/bench/procstat"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

const (
	// ParkTool is the tool whose calls the in-flight probe holds at its provider.
	ParkTool = "park"
	// streamsPerConn is how many parked calls share one agent connection.
	streamsPerConn = 100
	// parkTimeout bounds the wait for every call to reach the provider.
	parkTimeout = 30 * time.Second
	// connectTimeout bounds opening the agent connections.
	connectTimeout = 10 * time.Second
)

// InflightCallBytes registers [ParkTool] through a provider that holds every call it
// receives, starts calls single-call batches (one ExecuteBatch stream each, 100 per agent
// connection, connections opened beforehand), waits until all of them have reached the
// provider, and returns the growth of the server's VmRSS divided by calls. It then
// answers every call and waits for every batch to settle. The server's limits (in-flight
// calls per provider, streams per connection) must admit calls at once, or the probe
// fails after 30 s saying how many arrived.
func InflightCallBytes(ctx context.Context, addr string, pid, calls int) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := openProvider(ctx, addr, "probe-park")
	if err != nil {
		return 0, err
	}
	defer p.close()
	if err := p.register(1, []*toolsdv1.ToolDefinition{objectTool(ParkTool)}); err != nil {
		return 0, err
	}
	conns, err := agentConns(ctx, addr, (calls+streamsPerConn-1)/streamsPerConn)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if err != nil {
		return 0, err
	}
	before, err := procstat.RSS(pid)
	if err != nil {
		return 0, err
	}
	parked := make(chan parkResult, 1)
	go func() { parked <- p.park(calls) }()
	failed := make(chan error, 1)
	var batches errgroup.Group
	for i := range calls {
		batches.Go(func() error {
			err := parkedBatch(ctx, conns[i/streamsPerConn], "probe-park-"+strconv.Itoa(i))
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
			return err
		})
	}
	ids, ended, err := awaitParked(ctx, parked, failed)
	if err != nil {
		cancel()
		_ = batches.Wait()
		if !ended {
			// The receive loop ends with the cancelled stream, saying how many arrived.
			err = errors.Join(err, (<-parked).err)
		}
		return 0, err
	}
	after, rerr := procstat.RSS(pid)
	if err := p.release(ids); err != nil {
		cancel()
	}
	if err := batches.Wait(); err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	return float64(after-before) / float64(calls), nil
}

// agentConns opens n connections and waits until each is ready, so that connection setup
// is not counted as in-flight cost.
func agentConns(ctx context.Context, addr string, n int) ([]*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conns := make([]*grpc.ClientConn, 0, n)
	for range n {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return conns, fmt.Errorf("probe: dial %s: %w", addr, err)
		}
		conns = append(conns, c)
		c.Connect()
		for s := c.GetState(); s != connectivity.Ready; s = c.GetState() {
			if !c.WaitForStateChange(ctx, s) {
				return conns, fmt.Errorf("probe: connect %s: %w", addr, ctx.Err())
			}
		}
	}
	return conns, nil
}

// parkResult is what the provider's receive loop ends with.
type parkResult struct {
	ids []uint64
	err error
}

// awaitParked waits for the provider to hold every call, for parkTimeout at most; ended
// tells whether the provider's receive loop has returned.
func awaitParked(ctx context.Context, parked <-chan parkResult, failed <-chan error) (ids []uint64, ended bool, err error) {
	t := time.NewTimer(parkTimeout)
	defer t.Stop()
	select {
	case r := <-parked:
		return r.ids, true, r.err
	case err := <-failed:
		return nil, false, err
	case <-t.C:
		return nil, false, fmt.Errorf("probe: calls not all at the provider after %v (server limits?)", parkTimeout)
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// park receives ExecuteRequests without answering until n have arrived.
func (p *providerStream) park(n int) parkResult {
	ids := make([]uint64, 0, n)
	for len(ids) < n {
		m, err := p.stream.Recv()
		if err != nil {
			return parkResult{err: fmt.Errorf("probe: park: %d of %d calls arrived: %w", len(ids), n, err)}
		}
		if ex := m.GetExecute(); ex != nil {
			ids = append(ids, ex.GetRequestId())
		}
	}
	return parkResult{ids: ids}
}

// release answers every parked call with "ok".
func (p *providerStream) release(ids []uint64) error {
	for _, id := range ids {
		err := p.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{
			Result: &toolsdv1.ExecuteResult{RequestId: id, ValueJson: []byte(`"ok"`)},
		}})
		if err != nil {
			return fmt.Errorf("probe: release: %w", err)
		}
	}
	return nil
}

// parkedBatch runs one single-call batch of ParkTool and reads until settled.
func parkedBatch(ctx context.Context, conn *grpc.ClientConn, session string) error {
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(ctx)
	if err != nil {
		return fmt.Errorf("probe: ExecuteBatch: %w", err)
	}
	err = stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: session, Turn: 1, Step: 1,
		Calls: []*toolsdv1.ToolCall{{CallId: "call-0", Name: ParkTool, ArgumentsJson: `{"data":"x"}`}},
	}}})
	if err != nil {
		return fmt.Errorf("probe: send batch: %w", err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("probe: parked batch: %w", err)
		}
		if m.GetSettled() != nil {
			return nil
		}
	}
}
