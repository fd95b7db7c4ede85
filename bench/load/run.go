package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrEmptyWindow reports a run in which no batch completed inside the measured window:
// it has no latency or throughput to report, only a target too slow for the window.
var ErrEmptyWindow = errors.New("load: no batch completed in the measured window")

// ErrOutOfBatches reports an agent that sent its cap of batches ([WithMaxBatches])
// before the run ended: it stopped loading the target inside the run, so the window
// would count less load than the workload names.
var ErrOutOfBatches = errors.New("load: agent sent its cap of batches before the run ended")

// Run dials w.Agents agents, drives each through back-to-back batches for w.Warmup plus
// w.Duration, and summarizes the batches completed in the measured window. Every agent
// goroutine has ended when Run returns. The first failed batch, or agent out of batches
// ([ErrOutOfBatches]), cancels the run and is returned; a window in which no batch
// completed is [ErrEmptyWindow].
func Run(ctx context.Context, w Workload, dial Dialer, opts ...Option) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	o := defaultOptions
	for _, opt := range opts {
		opt(&o)
	}
	agents, err := dialAll(ctx, w, dial)
	if err != nil {
		return Result{}, err
	}
	defer closeAll(agents)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stop := make(chan struct{})
	spans := make([][]span, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			spans[i], errs[i] = drive(ctx, a, start, stop, o)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("load: %s agent %d: %w", w.Name, i, errs[i])
				cancel()
			}
		})
	}
	from, to, werr := window(ctx, start, w, o)
	close(stop)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	if werr != nil {
		return Result{}, fmt.Errorf("load: %s: %w", w.Name, werr)
	}
	var all []span
	for _, s := range spans {
		all = append(all, s...)
	}
	res := summarize(w, all, from, to)
	res.start = start
	if res.Batches == 0 {
		return Result{}, fmt.Errorf("%w: %s (%v)", ErrEmptyWindow, w.Name, res.Window)
	}
	return res, nil
}

// window waits out the warm-up, opens the measured window, keeps it open for w.Duration
// and closes it, returning its bounds as offsets from start.
func window(ctx context.Context, start time.Time, w Workload, o options) (from, to time.Duration, err error) {
	t := time.NewTimer(w.Warmup)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-t.C:
	}
	o.onStart()
	from = time.Since(start)
	t.Reset(w.Duration)
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-t.C:
	}
	to = time.Since(start)
	o.onEnd()
	return from, to, nil
}

// drive runs one agent's batches back to back until stop is closed; running out of its
// cap of batches before then is [ErrOutOfBatches]. A failure caused by the run
// being cancelled (another agent failed, or the caller gave up) is not this agent's error.
func drive(ctx context.Context, a Agent, start time.Time, stop <-chan struct{}, o options) ([]span, error) {
	spans := make([]span, 0, 1024)
	for {
		select {
		case <-stop:
			return spans, nil
		case <-ctx.Done():
			return spans, nil
		default:
		}
		if len(spans) >= o.maxBatches {
			return spans, fmt.Errorf("%w (%d)", ErrOutOfBatches, o.maxBatches)
		}
		t0 := time.Since(start)
		bctx, cancel := context.WithTimeout(ctx, o.batchTimeout)
		err := a.Do(bctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return spans, nil
			}
			return spans, fmt.Errorf("batch %d: %w", len(spans), err)
		}
		spans = append(spans, span{start: t0, end: time.Since(start)})
	}
}

func dialAll(ctx context.Context, w Workload, dial Dialer) ([]Agent, error) {
	agents := make([]Agent, 0, w.Agents)
	for i := range w.Agents {
		a, err := dial(ctx, i, w)
		if err != nil {
			closeAll(agents)
			return nil, fmt.Errorf("load: %s: dial agent %d: %w", w.Name, i, err)
		}
		agents = append(agents, a)
	}
	return agents, nil
}

func closeAll(agents []Agent) {
	for _, a := range agents {
		_ = a.Close()
	}
}
