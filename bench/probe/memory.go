package probe

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/toolsd/toolsd/bench/procstat"
)

// dialParallelism bounds concurrent dials when opening many streams.
const dialParallelism = 16

// IdleStreamBytes opens streams idle providers, each on its own connection as separate
// provider processes would be, waits for every welcome, and returns the growth of the
// server's resident memory (VmRSS of pid) divided by streams. RSS is coarse: it counts
// garbage the server has not yet collected and pages the runtime has not yet returned,
// so treat the result as an upper estimate.
func IdleStreamBytes(ctx context.Context, addr string, pid, streams int) (float64, error) {
	before, err := procstat.RSS(pid)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	open := make([]*providerStream, 0, streams)
	defer func() {
		for _, p := range open {
			p.close()
		}
	}()
	// Streams live on ctx, not on an errgroup context: that one ends with Wait.
	var g errgroup.Group
	g.SetLimit(dialParallelism)
	for i := range streams {
		g.Go(func() error {
			p, err := openProvider(ctx, addr, "probe-idle-"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			mu.Lock()
			open = append(open, p)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("probe: idle streams: %w", err)
	}
	after, err := procstat.RSS(pid)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(streams), nil
}
