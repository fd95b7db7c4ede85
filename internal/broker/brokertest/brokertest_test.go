package brokertest_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRegistrarOwnership(t *testing.T) {
	r := brokertest.NewRegistrar()
	def := tool.Definition{Name: "t", Parameters: []byte(`{"type":"object"}`)}
	if _, _, err := r.Register("s", def, "p1"); err != nil {
		t.Fatalf("Register(p1) = %v", err)
	}
	if _, _, err := r.Register("s", def, "p2"); !errors.Is(err, brokertest.ErrTaken) {
		t.Errorf("Register(p2) = %v, want ErrTaken", err)
	}
	if err := r.Unregister("s", "t", "p2"); !errors.Is(err, brokertest.ErrNotFound) {
		t.Errorf("Unregister(p2) = %v, want ErrNotFound", err)
	}
	r.RemoveOwner("p1")
	if _, ok := r.Lookup("s", "t"); ok {
		t.Error("Lookup after RemoveOwner found the tool")
	}
	r.WaitFor(t, "removal recorded", func() bool { return len(r.Removed()) == 1 })
	if got := r.Registrations(); got != 1 {
		t.Errorf("Registrations() = %d, want 1", got)
	}
}
