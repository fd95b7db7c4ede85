//go:build race

package registry

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so the
// allocations of anything drawing from one (a regexp's matcher) are meaningless under
// -race.
const raceEnabled = true
