//go:build !unix

package procs

import "time"

// processCPU cannot read the process's CPU time on this system: the controller stays
// off.
func processCPU() (time.Duration, bool) { return 0, false }
