package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolsd/toolsd/internal/config"
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

// TestUnknownFlagIsAUsageError: a flag toolsd does not have exits 2, as Go's own
// commands do, and main does not print the flag package's error a second time.
func TestUnknownFlagIsAUsageError(t *testing.T) {
	err := run([]string{"-bogus"})
	if !errors.As(err, new(usageError)) || exitCode(err) != 2 || !strings.Contains(err.Error(), "-bogus") {
		t.Errorf("run(-bogus) = %v (exit %d), want a usage error naming -bogus, exit 2", err, exitCode(err))
	}
	if err := run([]string{"-log-level", "loud"}); exitCode(err) != 1 {
		t.Errorf("run(-log-level loud) = %v (exit %d), want exit 1: the flag parsed, its value is refused", err, exitCode(err))
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

// TestEphemeralWithoutDataDir: a config file with data_dir "" is refused with a durable
// store, but -ephemeral makes the store memory, where data_dir is unused: toolsd starts,
// and a SIGHUP reload of the same file (under the same flags) is accepted. Errors the file
// holds keep its file:line:column; bad flag values are still the command line's.
func TestEphemeralWithoutDataDir(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "toolsd.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("data_dir: \"\"\nlog: {level: loud}\n")
	if err := run([]string{"-config", cfg, "-ephemeral"}); err == nil || !strings.Contains(err.Error(), cfg+":2:14: log.level:") || strings.Contains(err.Error(), "data_dir") {
		t.Errorf("run(-ephemeral, file with a bad log.level) = %v, want only log.level refused at its place in the file", err)
	}
	if err := run([]string{"-config", cfg}); err == nil || !strings.Contains(err.Error(), cfg+":1:11: data_dir: data_dir (\"\") must not be empty") {
		t.Errorf("run(file with no data_dir, bolt store) = %v, want data_dir refused at its place in the file", err)
	}
	write("data_dir: \"\"\n")
	if err := run([]string{"-config", cfg, "-ephemeral", "-log-format", "fancy"}); err == nil || !strings.Contains(err.Error(), "command line: log.format:") || strings.Contains(err.Error(), "data_dir") {
		t.Errorf("run(-ephemeral -log-format fancy) = %v, want only the command line's log.format refused", err)
	}

	d := startDaemon(t, "-config", cfg, "-ephemeral")
	if got := d.logged("toolsd serving"); len(got) != 1 || got[0]["session_store"] != "memory" {
		t.Errorf(`with data_dir "" and -ephemeral, serving lines = %v, want one with the memory store`, got)
	}
	write("data_dir: \"\"\npolicy: {default: deny}\n")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool {
		return len(d.logged("policy reloaded"))+len(d.logged("config reload failed; keeping the running policy and credentials")) > 0
	})
	if failed := d.logged("config reload failed; keeping the running policy and credentials"); len(failed) != 0 {
		t.Errorf("reload of a file with data_dir \"\" under -ephemeral failed: %v", failed[0]["error"])
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.wait(t)
}

// TestRunNamesATakenAddress: an address another process listens on stops the start with
// an error that names the key and flag to change, for the gRPC and the admin listener
// alike, rather than only the operating system's "address already in use".
func TestRunNamesATakenAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	addr := taken.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-ephemeral", "-listen", addr, "-admin-listen", ""}, "give listen, or -listen, a free address"},
		{[]string{"-ephemeral", "-listen", "127.0.0.1:0", "-admin-listen", addr}, "give admin_listen, or -admin-listen, a free address"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error naming %s and saying %q", tc.args, err, addr, tc.want)
		}
	}
}

// TestExampleProviderWithoutNotesFile: the example provider runs only with a notes file
// for its write_note, so -example-provider with -notes-file "" is refused rather than
// run without the provider asked for. (The empty -listen makes run fail rather than
// serve if the check is missing.)
func TestExampleProviderWithoutNotesFile(t *testing.T) {
	err := run([]string{"-ephemeral", "-example-provider", "-notes-file", "", "-listen", ""})
	if err == nil || !strings.Contains(err.Error(), "-notes-file") {
		t.Errorf(`run(-example-provider -notes-file "") = %v, want an error naming -notes-file`, err)
	}
}

// TestHelpSaysWhatEachFlagOverrides: toolsd -h tells, for every flag that sets a config
// key, the key it overrides (a flag given wins over the file) and the embedded default
// that holds when neither sets it, as defaults.yaml has it.
func TestHelpSaysWhatEachFlagOverrides(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-h")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("toolsd -h: %v\n%s", err, out)
	}
	usage := map[string]string{} // flag name -> its usage text
	name := ""
	for line := range strings.Lines(string(out)) {
		if f, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(strings.TrimSpace(f), " ")
			continue
		}
		if name != "" {
			usage[name] += strings.TrimSpace(line) + " "
		}
	}
	def, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ flag, key, def string }{
		{"listen", "listen", def.Listen},
		{"admin-listen", "admin_listen", def.AdminListen},
		{"data-dir", "data_dir", def.DataDir},
		{"session-store", "session.store", def.Session.Store},
		{"ephemeral", "session.store", ""},
		{"log-level", "log.level", def.Log.Level},
		{"log-format", "log.format", def.Log.Format},
	} {
		u, ok := usage[f.flag]
		if !ok {
			t.Errorf("toolsd -h lists no -%s:\n%s", f.flag, out)
			continue
		}
		if !strings.Contains(u, "overrides "+f.key) {
			t.Errorf("-%s usage %q does not say it overrides %s", f.flag, u, f.key)
		}
		if f.def != "" && !strings.Contains(u, "default "+f.def) {
			t.Errorf("-%s usage %q does not give the default, %s", f.flag, u, f.def)
		}
	}
}
