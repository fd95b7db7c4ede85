package app_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/app"
)

// TestPinsSurviveARestart: with pinning on and a durable log, the pins are kept in the
// data directory, so a provider that comes back after a restart with a changed
// definition is refused as it would have been without the restart — a restart is when
// every provider registers again, the moment a rug pull would otherwise go unnoticed.
func TestPinsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := durableConfig(t, dir, "registry: {pinning: refuse}\n")
	a, stop, runErr := runApp(t, cfg)
	first := helloHand(t, dial(t, a.Addr()), "first")
	st := registerHand(t, first, "", pinnedDef("v1"))
	if st.GetErrorCode() != "" {
		t.Fatalf("first registration = %v, want accepted", st)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("App.Run() = %v", err)
	}

	// A save a crash interrupted leaves a temporary file beside the pins: the next start
	// removes it.
	leftover := filepath.Join(dir, "pins.json.tmp-123456")
	if err := os.WriteFile(leftover, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	again := startConfig(t, durableConfig(t, dir, "registry: {pinning: refuse}\n"))
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("stat(%s) after a start = %v, want it removed", leftover, err)
	}
	second := helloHand(t, again.conn, "second")
	if st := registerHand(t, second, "", pinnedDef("v2")); st.GetErrorCode() != "FAILED_PRECONDITION" || !strings.Contains(st.GetErrorMessage(), "pinned") {
		t.Errorf("changed registration after a restart = %v, want FAILED_PRECONDITION (pinned)", st)
	}
	if st := registerHand(t, second, "", pinnedDef("v1")); st.GetErrorCode() != "" {
		t.Errorf("the pinned definition after a restart = %v, want accepted", st)
	}
}

// TestPinFileHashesInCapitals: a pin file edited by hand with a hash in capital hex
// pins what it names, as in lower case; it would otherwise match no definition, and
// every registration of the tool would be refused as changed.
func TestPinFileHashesInCapitals(t *testing.T) {
	dir := t.TempDir()
	a, stop, runErr := runApp(t, durableConfig(t, dir, "registry: {pinning: refuse}\n"))
	if st := registerHand(t, helloHand(t, dial(t, a.Addr()), "first"), "", pinnedDef("v1")); st.GetErrorCode() != "" {
		t.Fatalf("first registration = %v, want accepted", st)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("App.Run() = %v", err)
	}
	path := filepath.Join(dir, "pins.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	pins := f["pins"].([]any)
	if len(pins) != 1 {
		t.Fatalf("pin file holds %d pins, want 1", len(pins))
	}
	pin := pins[0].(map[string]any)
	pin["hash"] = strings.ToUpper(pin["hash"].(string))
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	again := startConfig(t, durableConfig(t, dir, "registry: {pinning: refuse}\n"))
	second := helloHand(t, again.conn, "second")
	if st := registerHand(t, second, "", pinnedDef("v2")); st.GetErrorCode() != "FAILED_PRECONDITION" {
		t.Errorf("a changed definition after a restart = %v, want FAILED_PRECONDITION (pinned)", st)
	}
	if st := registerHand(t, second, "", pinnedDef("v1")); st.GetErrorCode() != "" {
		t.Errorf("the pinned definition after a restart = %v, want accepted", st)
	}
}

// TestPinsAreSavedWhileRunning: a pin reaches the file without a shutdown (a crash
// loses at most the last second's), and with pinning off nothing is written.
func TestPinsAreSavedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	e := startConfig(t, durableConfig(t, dir, "registry: {pinning: quarantine}\n"))
	hash := registerHand(t, helloHand(t, e.conn, "p"), "team", pinnedDef("v1")).GetContentHash()
	path := filepath.Join(dir, "pins.json")
	var saved struct {
		Pins []struct{ Scope, Name, Hash string }
	}
	waitFor(t, "the pin to be saved", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &saved) == nil && len(saved.Pins) == 1
	})
	if p := saved.Pins[0]; p.Scope != "team" || p.Name != "pinned" || p.Hash != hash {
		t.Errorf("saved pin = %+v, want team/pinned with hash %s", p, hash)
	}

	off := t.TempDir()
	a, stop, runErr := runApp(t, durableConfig(t, off, ""))
	if st := registerHand(t, helloHand(t, dial(t, a.Addr()), "p"), "", pinnedDef("v1")); st.GetErrorCode() != "" {
		t.Fatalf("registration = %v", st)
	}
	stop() // a shutdown saves what pinning has to save
	if err := <-runErr; err != nil {
		t.Fatalf("App.Run() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(off, "pins.json")); !os.IsNotExist(err) {
		t.Errorf("with pinning off, stat(pins.json) = %v, want no file", err)
	}
}

// TestUnreadablePinFileRefusesStart: a pin file toolsd cannot read whole stops the
// start with an error naming it; starting without the pins would let changed
// definitions in unnoticed.
func TestUnreadablePinFileRefusesStart(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for name, content := range map[string]string{
		"not JSON":       "{pins",
		"newer version":  `{"version": 2, "hash_version": "toolsd.tool.v1", "pins": []}`,
		"other hashes":   `{"version": 1, "hash_version": "toolsd.tool.v2", "pins": []}`,
		"bad scope":      `{"version": 1, "hash_version": "toolsd.tool.v1", "pins": [{"scope": "a//b", "name": "t", "hash": "` + hash + `"}]}`,
		"bad name":       `{"version": 1, "hash_version": "toolsd.tool.v1", "pins": [{"scope": "", "name": "", "hash": "` + hash + `"}]}`,
		"truncated hash": `{"version": 1, "hash_version": "toolsd.tool.v1", "pins": [{"scope": "", "name": "t", "hash": "abcd"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "pins.json"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			a, err := app.New(durableConfig(t, dir, "registry: {pinning: refuse}\n"))
			if err == nil {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				_ = a.Run(ctx)
				t.Fatal("app.New() = nil, want an error naming the pin file")
			}
			if !strings.Contains(err.Error(), "pins.json") {
				t.Errorf("app.New() = %v, want it to name pins.json", err)
			}
		})
	}
}

// TestStartKeepsFilesBesideThePins: a start removes only the temporary files of
// interrupted saves, not an operator's files named after the pin file, such as the
// pins.json.broken of one who moved an unreadable pin file away as the start's error
// says to, or a pins.json.bak.
func TestStartKeepsFilesBesideThePins(t *testing.T) {
	dir := t.TempDir()
	kept := []string{"pins.json.broken", "pins.json.bak", "pins.json.20261201"}
	for _, name := range kept {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{pins"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startConfig(t, durableConfig(t, dir, "registry: {pinning: refuse}\n"))
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("stat(%s) after a start = %v, want the operator's file kept", name, err)
		}
	}
}

// TestPinFileOverItsLargestRefusesStart: a pin file larger than toolsd writes for the
// most pins it keeps (a file of gigabytes put in its place, a damaged file system's) is
// refused naming it, before it is read: reading it whole to refuse it as not a pin file
// could take more memory than the container has.
func TestPinFileOverItsLargestRefusesStart(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 30
	f, err := os.Create(filepath.Join(dir, "pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A sparse gibibyte that starts as a pin file would.
	if _, err := f.WriteString(`{"version": 1, "hash_version": "toolsd.tool.v1", "pins": [`); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := durableConfig(t, dir, "registry: {pinning: refuse}\n")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a, err := app.New(cfg)
	runtime.ReadMemStats(&after)
	if err == nil {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_ = a.Run(ctx)
		t.Fatal("app.New() = nil, want an error naming the pin file")
	}
	if !strings.Contains(err.Error(), "pins.json") {
		t.Errorf("app.New() = %v, want it to name pins.json", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > size/4 {
		t.Errorf("app.New() allocated %d MiB refusing a pin file of %d MiB, want it refused unread", grew>>20, size>>20)
	}
}
