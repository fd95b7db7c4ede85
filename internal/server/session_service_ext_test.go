package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/session"
)

// pageBytes records the most payload bytes one Read of the wrapped store returned.
type pageBytes struct {
	session.Store
	mu  sync.Mutex
	max int
}

func (p *pageBytes) Read(ctx context.Context, id string, from uint64, limit int) ([]session.Event, error) {
	evs, err := p.Store.Read(ctx, id, from, limit)
	n := 0
	for i := range evs {
		if m := evs[i].Message; m != nil {
			n += len(m.Content)
		}
	}
	p.mu.Lock()
	p.max = max(p.max, n)
	p.mu.Unlock()
	return evs, err
}

// TestReadSessionPagesAreBoundedWhenEventsGrow: ReadSession sizes each page by the
// events of the one before, so a session whose small events are followed by large
// ones had its whole run of large events read (decoded, from bbolt) in one page: 512
// of them, gigabytes for results of a few megabytes. A page now stops at about
// session.PageBytes whatever its events' sizes, and the read still delivers every
// event once, in order.
func TestReadSessionPagesAreBoundedWhenEventsGrow(t *testing.T) {
	bolt, err := session.Open(t.TempDir(), session.WithDurability(session.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bolt.Close() }()
	const small, large, largeBytes = 600, 24, 1 << 20
	var evs []session.Event
	for range small {
		evs = append(evs, session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: "small"}})
	}
	big := strings.Repeat("x", largeBytes)
	for range large {
		evs = append(evs, session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: big}})
	}
	if _, err := bolt.Append(t.Context(), "s", evs...); err != nil {
		t.Fatal(err)
	}
	store := &pageBytes{Store: bolt}
	_, tools := serveTools(t, store)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: "s"}, grpc.MaxCallRecvMsgSize(4*largeBytes))
	if err != nil {
		t.Fatal(err)
	}
	var next uint64 = 1
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ReadSession(s).Recv() = %v", err)
		}
		if got := m.GetEvent().GetSeq(); got != next {
			t.Fatalf("ReadSession(s) sent seq %d, want %d", got, next)
		}
		next++
	}
	if next != small+large+1 {
		t.Errorf("ReadSession(s) sent %d events, want %d", next-1, small+large)
	}
	// A page may end with the event that takes it past PageBytes, and holds two events
	// at least (the one it repeats from the page before, and one more).
	if limit := session.PageBytes + 2*largeBytes; store.max > limit {
		t.Errorf("ReadSession(s) read a page of %d bytes, want at most %d", store.max, limit)
	}
}

// corruptStore is a store whose reads find a damaged record.
type corruptStore struct{ *session.Memory }

func (corruptStore) Read(context.Context, string, uint64, int) ([]session.Event, error) {
	return nil, fmt.Errorf("%w: /var/lib/toolsd/sessions.db: page 4711 checksum", session.ErrCorrupt)
}

// TestReadOfADamagedLogIsDataLoss: a damaged record found while serving was a bare
// Internal ("internal error"). It is DataLoss (SESSION_LOG_CORRUPT), and the store's
// text, which names files and offsets, stays in toolsd's log.
func TestReadOfADamagedLogIsDataLoss(t *testing.T) {
	mem := session.NewMemory()
	defer func() { _ = mem.Close() }()
	_, tools := serveTools(t, corruptStore{mem})
	stream, err := tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "s"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.DataLoss || reason(err) != "SESSION_LOG_CORRUPT" {
		t.Fatalf("ReadSession(damaged) = %v, want DataLoss (SESSION_LOG_CORRUPT)", err)
	}
	if strings.Contains(err.Error(), "/var/lib") {
		t.Errorf("ReadSession(damaged) error %q names the store's file", err)
	}
}

// stoppedStore is a bbolt store that a commit panicking inside bbolt (a damaged page met
// as the commit writes) stopped: its error wraps ErrStopped, and the commit's
// ErrCorrupt as its cause.
type stoppedStore struct{ *session.Memory }

func (stoppedStore) Read(context.Context, string, uint64, int) ([]session.Event, error) {
	return nil, fmt.Errorf("%w: %w", session.ErrStopped, fmt.Errorf("%w: page 4711 already freed", session.ErrCorrupt))
}

// TestReadOfAStoppedStoreIsUnavailable: a store stopped by a commit whose cause was
// damage answered every later request, of any session, as a damaged record of its own
// (DataLoss, SESSION_LOG_CORRUPT), a loss a client does not retry, instead of the
// store's stop (Unavailable, SESSION_STORE_STOPPED: restart toolsd).
func TestReadOfAStoppedStoreIsUnavailable(t *testing.T) {
	mem := session.NewMemory()
	defer func() { _ = mem.Close() }()
	_, tools := serveTools(t, stoppedStore{mem})
	stream, err := tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "s"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unavailable || reason(err) != "SESSION_STORE_STOPPED" {
		t.Fatalf("ReadSession(stopped store) = %v, want Unavailable (SESSION_STORE_STOPPED)", err)
	}
}

// pathStoppedStore is a durable store that a failed write stopped: its errors wrap
// ErrStopped and the write's error, which names the store's file.
type pathStoppedStore struct{ *session.Memory }

var errStoppedAtPath = fmt.Errorf("%w: session: write the journal: write /var/lib/toolsd/sessions.journal: no space left on device", session.ErrStopped)

func (pathStoppedStore) Read(context.Context, string, uint64, int) ([]session.Event, error) {
	return nil, errStoppedAtPath
}

func (pathStoppedStore) Owner(context.Context, string) (session.Owner, bool, error) {
	return session.Owner{}, false, errStoppedAtPath
}

// TestStoppedStoreKeepsItsFileToItself: a store stopped by a failed write answers
// Unavailable (SESSION_STORE_STOPPED) without the write's error, which names the
// store's file: that is for toolsd's log, which the store wrote as it stopped, not for
// every client (as a damaged record's text is not: TestReadOfADamagedLogIsDataLoss).
func TestStoppedStoreKeepsItsFileToItself(t *testing.T) {
	mem := session.NewMemory()
	defer func() { _ = mem.Close() }()
	_, tools := serveTools(t, pathStoppedStore{mem})
	read := func() error {
		stream, err := tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "s"})
		if err == nil {
			_, err = stream.Recv()
		}
		return err
	}
	deleteSession := func() error {
		_, err := tools.DeleteSession(t.Context(), &toolsdv1.DeleteSessionRequest{SessionId: "s"})
		return err
	}
	for name, rpc := range map[string]func() error{"ReadSession": read, "DeleteSession": deleteSession} {
		err := rpc()
		if status.Code(err) != codes.Unavailable || reason(err) != "SESSION_STORE_STOPPED" {
			t.Errorf("%s(stopped store) = %v, want Unavailable (SESSION_STORE_STOPPED)", name, err)
		}
		if strings.Contains(err.Error(), "/var/lib") {
			t.Errorf("%s(stopped store) error %q names the store's file", name, err)
		}
	}
}
