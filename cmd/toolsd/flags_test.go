package main

import (
	"strings"
	"testing"
)

// TestRunRefusesStrayArguments: flag parsing stops at the first argument that is not a
// flag, so toolsd must refuse one rather than start with the flags after it ignored
// ("toolsd toolsd.yaml", "toolsd -ephemeral true -listen ...").
func TestRunRefusesStrayArguments(t *testing.T) {
	err := run([]string{"-log-level", "loud", "toolsd.yaml", "-listen", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), `"toolsd.yaml"`) {
		t.Errorf("run with a stray argument = %v, want an error naming it", err)
	}
}

