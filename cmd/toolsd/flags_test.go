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

// TestEphemeralContradictingSessionStore: -ephemeral picks the in-memory store, so a
// -session-store naming another one (or none that exists) is a mistake on the command
// line, not a value to drop silently. (Each command line also has an empty -listen, so
// that without the check run refuses it rather than starting to serve.)
func TestEphemeralContradictingSessionStore(t *testing.T) {
	for _, args := range [][]string{
		{"-ephemeral", "-session-store", "journal"},
		{"-session-store", "bolt", "-ephemeral"},
		{"-ephemeral", "-session-store", "sqlite"},
		{"-ephemeral", "-session-store", ""},
	} {
		err := run(append(args, "-listen", ""))
		if err == nil || !strings.Contains(err.Error(), "-ephemeral") || !strings.Contains(err.Error(), "-session-store") {
			t.Errorf("run(%q) = %v, want an error naming -ephemeral and -session-store", args, err)
		}
	}
	d := startDaemon(t, "-ephemeral", "-session-store", "memory")
	if got := d.logged("toolsd serving"); len(got) != 1 || got[0]["session_store"] != "memory" {
		t.Errorf("with -ephemeral -session-store memory, serving lines = %v, want one with the memory store", got)
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
