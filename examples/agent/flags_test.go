package main

import (
	"os"
	"testing"

	"github.com/toolsd/toolsd/examples/internal/flagtest"
)

func TestMain(m *testing.M) {
	flagtest.RunMain(main)
	os.Exit(m.Run())
}

func TestFlagErrorsPrintedOnce(t *testing.T) { flagtest.PrintsErrorsOnce(t) }

func TestParseFlagsRefusesArguments(t *testing.T) {
	flagtest.RefusesArguments(t, func(args []string) (string, error) {
		o, err := parseFlags(args)
		return o.addr, err
	})
}

func TestParseFlagsRefusesConnectionFlagsThatCannotWork(t *testing.T) {
	flagtest.RefusesConnectionFlagsThatCannotWork(t, func(args []string) error {
		_, err := parseFlags(args)
		return err
	})
}
