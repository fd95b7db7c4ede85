package streamgate_test

import (
	"testing"

	"github.com/toolsd/toolsd/internal/streamgate"
)

// TestRetireWaitsForTheWorkInHand: Retire returns only after a Do in progress, and Do
// runs nothing once retired.
func TestRetireWaitsForTheWorkInHand(t *testing.T) {
	var r streamgate.Retire
	inside, release, retired := make(chan struct{}), make(chan struct{}), make(chan struct{})
	finished := false
	go r.Do(func() {
		close(inside)
		<-release
		finished = true
	})
	<-inside
	go func() {
		r.Retire()
		close(retired)
	}()
	close(release)
	<-retired
	if !finished {
		t.Error("Retire() returned before the Do in progress finished")
	}
	if r.Do(func() { t.Error("Do() ran its work after Retire()") }) {
		t.Error("Do() after Retire() = true, want false")
	}
}
