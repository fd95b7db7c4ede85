package session

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// closeStore closes s at the end of a test and reports a failing close.
func closeStore(tb testing.TB, s interface{ Close() error }) {
	if err := s.Close(); err != nil {
		tb.Errorf("Close() = %v", err)
	}
}
