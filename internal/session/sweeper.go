package session

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// sweeper runs a store's retention sweep on a ticker until stopped.
type sweeper struct {
	stop chan struct{}
	done chan struct{}
}

// startSweeper starts the background sweep, or returns nil when retention is off.
func startSweeper(o *options, sweep func(time.Time) (int, error)) *sweeper {
	if !o.retains() || o.sweepInterval <= 0 {
		return nil
	}
	s := &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(o, sweep)
	return s
}

func (s *sweeper) run(o *options, sweep func(time.Time) (int, error)) {
	defer close(s.done)
	t := time.NewTicker(o.sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			n, err := sweep(o.clock())
			if err != nil {
				o.logger.Warn("session retention sweep failed", zap.Error(err))
				continue
			}
			if n > 0 {
				o.logger.Info("session retention sweep", zap.Int("removed", n))
			}
		}
	}
}

// close stops the sweeper and waits for it; nil-safe.
func (s *sweeper) close() {
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
}

// sessionAge is one retention candidate.
type sessionAge struct {
	id   string
	last time.Time
}

// pickVictims returns the candidates the retention limits delete as of now, longest idle
// first: each one idle since before now-maxAge, then as many more as it takes to leave
// at most maxSessions. keep is asked about each one the limits would delete, in that
// order, and reports one that must stay (an open call, a hold): it still counts toward
// maxSessions, so the next longest idle one goes in its place. A limit <= 0 is no limit.
// It sorts candidates in place and returns them reused.
func pickVictims(candidates []sessionAge, o *options, now time.Time, keep func(id string) bool) []sessionAge {
	slices.SortFunc(candidates, func(a, b sessionAge) int {
		return cmp.Or(a.last.Compare(b.last), strings.Compare(a.id, b.id))
	})
	cutoff := now.Add(-o.maxAge)
	left := len(candidates)
	out := candidates[:0]
	for _, c := range candidates {
		expired := o.maxAge > 0 && c.last.Before(cutoff)
		if !expired && (o.maxSessions <= 0 || left <= o.maxSessions) {
			break
		}
		if keep(c.id) {
			continue
		}
		out = append(out, c)
		left--
	}
	return out
}
