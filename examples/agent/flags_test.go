package main

import (
	"testing"

	"github.com/toolsd/toolsd/examples/internal/flagtest"
)

func TestParseFlagsRefusesArguments(t *testing.T) {
	flagtest.RefusesArguments(t, func(args []string) (string, error) {
		o, err := parseFlags(args)
		return o.addr, err
	})
}
