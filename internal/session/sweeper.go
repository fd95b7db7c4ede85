package session

import (
	"slices"
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

// overflow returns the oldest candidates beyond the newest limit (none when limit <= 0,
// which means no limit). It sorts candidates in place, oldest first.
func overflow(candidates []sessionAge, limit int) []sessionAge {
	if limit <= 0 || len(candidates) <= limit {
		return nil
	}
	slices.SortFunc(candidates, func(a, b sessionAge) int { return a.last.Compare(b.last) })
	return candidates[:len(candidates)-limit]
}
