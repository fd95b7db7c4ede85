package tool_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/internal/tool/tooltest"
)

func TestEnded(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	passed, ahead := &atomic.Bool{}, &atomic.Bool{}
	passed.Store(true)
	for name, tc := range map[string]struct {
		ctx  context.Context
		want bool
	}{
		"no deadline":                        {t.Context(), false},
		"cancelled":                          {cancelled, true},
		"deadline ahead":                     {tooltest.LateTimer{Context: t.Context(), Passed: ahead}, false},
		"deadline passed, timer not yet run": {tooltest.LateTimer{Context: t.Context(), Passed: passed}, true},
	} {
		if got := tool.Ended(tc.ctx); got != tc.want {
			t.Errorf("Ended(%s) = %v, want %v", name, got, tc.want)
		}
	}
}
