package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestParseFlagsRefusesArguments checks that an argument that is not a flag is refused,
// naming it, rather than ignored together with the flags after it (parsing stops there):
// "-addr" after the address given without it would be dropped, and the hook would dial the
// default address instead.
func TestParseFlagsRefusesArguments(t *testing.T) {
	o, err := parseFlags([]string{"-addr", "127.0.0.1:50999"})
	if err != nil || o.addr != "127.0.0.1:50999" {
		t.Fatalf("parseFlags(-addr 127.0.0.1:50999) = %+v, %v; want that address", o, err)
	}
	for _, args := range [][]string{
		{"127.0.0.1:50999"},
		{"127.0.0.1:50999", "-addr", "127.0.0.1:50998"},
	} {
		_, err := parseFlags(args)
		if err == nil || !strings.Contains(err.Error(), `unexpected argument "127.0.0.1:50999"`) {
			t.Errorf("parseFlags(%q) = %v, want an error naming the unexpected argument", args, err)
		}
	}
	if _, err := parseFlags([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseFlags(-h) = %v, want flag.ErrHelp (usage, exit 0)", err)
	}
}
