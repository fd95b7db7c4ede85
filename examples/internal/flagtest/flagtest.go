// Package flagtest checks the command lines of the example programs.
package flagtest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mainArgs is the environment variable that holds, NUL-separated, the command line
// [RunMain] runs a program's main with.
const mainArgs = "FLAGTEST_MAIN_ARGS"

// RunMain runs main with the command line [PrintsErrorsOnce] chose, then exits 0 (main
// exits by itself otherwise), when the test binary was started by PrintsErrorsOnce;
// otherwise it returns at once. A program's TestMain calls it first.
func RunMain(main func()) {
	args, ok := os.LookupEnv(mainArgs)
	if !ok {
		return
	}
	os.Args = append([]string{os.Args[0]}, strings.Split(args, "\x00")...)
	main()
	os.Exit(0)
}

// PrintsErrorsOnce runs the program (the test binary, through [RunMain]) with a flag it
// does not have, with an argument that is not a flag and with a token without TLS
// (package dialflags), and checks that each exits 2 having printed its error once, with
// the usage, as package flag reports an error.
func PrintsErrorsOnce(t *testing.T) {
	t.Helper()
	for _, tc := range []struct{ arg, want string }{
		{"-no-such-flag", "flag provided but not defined: -no-such-flag"},
		{"127.0.0.1:50999", `unexpected argument "127.0.0.1:50999"`},
		{"-token=t0k3n", "a bearer token needs TLS"},
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mainArgs+"="+tc.arg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("program %s: %v, want exit status 2", tc.arg, err)
		}
		out := stderr.String()
		if n := strings.Count(out, tc.want); n != 1 {
			t.Errorf("program %s printed %q %d times, want once; stderr:\n%s", tc.arg, tc.want, n, out)
		}
		if !strings.Contains(out, "-addr") {
			t.Errorf("program %s printed no usage (no -addr); stderr:\n%s", tc.arg, out)
		}
	}
}

// RefusesArguments checks that parse, a program's flag parsing returning the toolsd
// address it will use, refuses an argument that is not a flag, naming it, rather than
// ignore it together with the flags after it (Go's flag parsing stops there): "-addr"
// after an address given without it would be dropped, and the program would dial the
// default address instead. -h is flag.ErrHelp (usage, exit 0).
func RefusesArguments(t *testing.T, parse func(args []string) (addr string, err error)) {
	t.Helper()
	addr, err := parse([]string{"-addr", "127.0.0.1:50999"})
	if err != nil || addr != "127.0.0.1:50999" {
		t.Fatalf("parseFlags(-addr 127.0.0.1:50999) = %q, %v; want that address", addr, err)
	}
	for _, args := range [][]string{
		{"127.0.0.1:50999"},
		{"127.0.0.1:50999", "-addr", "127.0.0.1:50998"},
	} {
		_, err := parse(args)
		if err == nil || !strings.Contains(err.Error(), `unexpected argument "127.0.0.1:50999"`) {
			t.Errorf("parseFlags(%q) = %v, want an error naming the unexpected argument", args, err)
		}
	}
	if _, err := parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h) = %v, want flag.ErrHelp (usage, exit 0)", err)
	}
}

// RefusesConnectionFlagsThatCannotWork checks that parse, a program's flag parsing,
// refuses the connection flags (package dialflags) that cannot work together, saying
// why, and takes those that can: a bearer token without TLS, which toolsd would get in
// clear, a client certificate without its key, and two tokens.
func RefusesConnectionFlagsThatCannotWork(t *testing.T, parse func(args []string) error) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want string // "" when the flags are taken
	}{
		{[]string{"-token", "t0k3n"}, "a bearer token needs TLS"},
		{[]string{"-token-file", "token.txt"}, "a bearer token needs TLS"},
		{[]string{"-cert", "client.pem"}, "-cert and -key go together"},
		{[]string{"-ca", "ca.pem", "-key", "client-key.pem"}, "-cert and -key go together"},
		{[]string{"-ca", "ca.pem", "-token", "t0k3n", "-token-file", "token.txt"}, "-token and -token-file"},
		{[]string{"-ca", "ca.pem", "-token-file", "token.txt"}, ""},
		{[]string{"-tls", "-token", "t0k3n"}, ""},
		{[]string{"-ca", "ca.pem", "-server-name", "toolsd.internal", "-cert", "client.pem", "-key", "client-key.pem"}, ""},
	} {
		err := parse(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v, want the flags taken", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("parseFlags(%q) = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
