package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the role processes the end-to-end tests start: the harness
// re-executes its own binary with -role, which under test is this test binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		if err := run(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "role:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
