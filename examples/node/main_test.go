// Package node_test runs the Node.js example provider and agent loop (provider.mjs,
// agent.mjs) against an in-process toolsd, so the protocol they speak by hand is held to
// what toolsd does. It skips when node or npm is not on PATH.
package node_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
