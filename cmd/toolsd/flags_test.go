package main

import (
	"os"
	"path/filepath"
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

// TestRunBlamesFlagsForTheirValues: a bad value given by a flag is reported as the
// command line's, not as the config file's (or the embedded defaults'), which hold a
// valid one.
func TestRunBlamesFlagsForTheirValues(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "toolsd.yaml")
	if err := os.WriteFile(cfg, []byte("log: {level: info}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-log-level", "loud"},
		{"-config", cfg, "-log-level", "loud"},
		{"-config", cfg, "-session-store", "sqlite"},
	} {
		err := run(args)
		if err == nil || !strings.Contains(err.Error(), "command line") || strings.Contains(err.Error(), ".yaml") {
			t.Errorf("run(%q) = %v, want an error blaming the command line", args, err)
		}
	}
}

// TestEmptyFlagOverridesTheFile: a flag given with an empty value still overrides the
// file: -admin-listen "" runs with no admin listener, -listen "" is refused.
func TestEmptyFlagOverridesTheFile(t *testing.T) {
	d := startDaemon(t, "-ephemeral", "-admin-listen", "")
	if d.admin != "" {
		t.Errorf(`with -admin-listen "", toolsd serves admin on %q; want none`, d.admin)
	}
	if err := run([]string{"-ephemeral", "-listen", ""}); err == nil || !strings.Contains(err.Error(), "command line: listen: must not be empty") {
		t.Errorf(`run(-listen "") = %v, want the command line's empty listen refused`, err)
	}
}
