// Package flagtest checks the command lines of the example programs.
package flagtest

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

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
