package relay

import (
	"errors"
	"sync"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// ErrNoProvider reports a call with no provider connected.
var ErrNoProvider = errors.New("relay: no provider connected")

// hub holds the current provider connection.
type hub struct {
	mu   sync.Mutex
	prov *providerConn
}

func (h *hub) current() (*providerConn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prov == nil {
		return nil, ErrNoProvider
	}
	return h.prov, nil
}

func (h *hub) attach(p *providerConn) {
	h.mu.Lock()
	h.prov = p
	h.mu.Unlock()
}

func (h *hub) detach(p *providerConn) {
	h.mu.Lock()
	if h.prov == p {
		h.prov = nil
	}
	h.mu.Unlock()
}

// providerConn is one provider's Connect stream and its calls awaiting a result.
type providerConn struct {
	sendMu sync.Mutex
	stream toolsdv1.ProviderService_ConnectServer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *toolsdv1.ExecuteResult
	gone    bool
}

func newProviderConn(stream toolsdv1.ProviderService_ConnectServer) *providerConn {
	return &providerConn{stream: stream, pending: make(map[uint64]chan *toolsdv1.ExecuteResult)}
}

// execute sends one call down the stream; its result arrives on the returned channel.
func (p *providerConn) execute(req *toolsdv1.ExecuteRequest) (uint64, <-chan *toolsdv1.ExecuteResult, error) {
	ch := make(chan *toolsdv1.ExecuteResult, 1)
	p.mu.Lock()
	if p.gone {
		p.mu.Unlock()
		return 0, nil, ErrNoProvider
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()
	req.RequestId = id
	if err := p.send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Execute{Execute: req}}); err != nil {
		p.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

func (p *providerConn) send(m *toolsdv1.ProviderServiceConnectResponse) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.stream.Send(m)
}

// deliver hands a result to its waiting call; unknown ids are dropped.
func (p *providerConn) deliver(r *toolsdv1.ExecuteResult) {
	p.mu.Lock()
	ch, ok := p.pending[r.GetRequestId()]
	delete(p.pending, r.GetRequestId())
	p.mu.Unlock()
	if ok {
		ch <- r
	}
}

func (p *providerConn) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// close fails every waiting call: the provider is gone.
func (p *providerConn) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = true
	for id, ch := range p.pending {
		ch <- &toolsdv1.ExecuteResult{RequestId: id, IsError: true, ErrorMessage: []byte("provider gone")}
		delete(p.pending, id)
	}
}
