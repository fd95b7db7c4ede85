package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/server"
	"github.com/toolsd/toolsd/internal/session"
)

// damageMark is the text of the one event that the tests below damage on disk.
const damageMark = "the record that will be damaged"

// damagedBolt is a bbolt log in dir whose session s has one event, event 1, whose value
// was overwritten behind the store's back with bytes that do not decode.
func damagedBolt(t *testing.T, dir string) (session.Store, string) {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	appendMark(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, session.FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("sessions")).Bucket([]byte("s")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0xff})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if s, err = session.Open(dir); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// damagedJournal is a journal in dir that keeps no event in memory, whose session s
// has one event, whose bytes in the file were changed behind the store's back.
func damagedJournal(t *testing.T, dir string) (session.Store, string) {
	t.Helper()
	s, err := session.OpenJournal(dir, session.WithHotFor(-1))
	if err != nil {
		t.Fatal(err)
	}
	appendMark(t, s)
	path := filepath.Join(dir, session.JournalFileName)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(file, []byte(damageMark))
	if at < 0 {
		t.Fatal("the event is not in the journal file")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0) // the open journal's own file
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("T"), int64(at))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func appendMark(t *testing.T, s session.Store) {
	t.Helper()
	ev := session.Event{Type: session.TypeUserMessage, Message: &session.MessageRecord{Content: damageMark}}
	if _, err := s.Append(t.Context(), "s", ev); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedRecordIsLoggedWithItsFile: a damaged record found by a ReadSession fails
// it with DataLoss (SESSION_LOG_CORRUPT), and toolsd's log line names the store's file
// and the record (its session, and its seq or offset), as the README says; the bbolt
// store's line named neither the file nor, for some damage, the session, and the
// journal's named only an offset.
func TestDamagedRecordIsLoggedWithItsFile(t *testing.T) {
	for name, tc := range map[string]struct {
		open   func(t *testing.T, dir string) (session.Store, string)
		record string
	}{
		"bbolt":   {open: damagedBolt, record: "event 1"},
		"journal": {open: damagedJournal, record: "journal record at"},
	} {
		t.Run(name, func(t *testing.T) {
			store, path := tc.open(t, t.TempDir())
			defer func() { _ = store.Close() }()
			core, logs := observer.New(zap.ErrorLevel)
			srv := server.New(server.Deps{Sessions: store, Logger: zap.New(core)})
			g := grpc.NewServer()
			toolsdv1.RegisterToolServiceServer(g, srv)
			tools := toolsdv1.NewToolServiceClient(serveBufconn(t, g, grpc.WithTransportCredentials(insecure.NewCredentials())))

			stream, err := tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "s"})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.DataLoss || reason(err) != "SESSION_LOG_CORRUPT" {
				t.Fatalf("ReadSession(damaged) = %v, want DataLoss (SESSION_LOG_CORRUPT)", err)
			}
			lines := logs.FilterMessage("session log damaged").All()
			if len(lines) != 1 {
				t.Fatalf("%q logged %d times, want once", "session log damaged", len(lines))
			}
			logged, _ := lines[0].ContextMap()["error"].(string)
			for _, want := range []string{path, `session "s"`, tc.record} {
				if !strings.Contains(logged, want) {
					t.Errorf("session log damaged: error = %q, want it to name %q", logged, want)
				}
			}
		})
	}
}
