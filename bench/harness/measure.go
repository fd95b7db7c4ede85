package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/procstat"
)

// sample is one workload run on one fresh instance of a target.
type sample struct {
	target string
	result load.Result
	// cpuPerCall is server CPU µs per call in the window; nil when not measured.
	cpuPerCall *float64
	// providerCPUPerCall is the provider process's CPU µs per call; nil for a target
	// whose tool runs inside its server.
	providerCPUPerCall *float64
	// agentCPUPerCall is the harness process's CPU µs per call: the agents, which run
	// in it, and the little the harness itself does in the window.
	agentCPUPerCall *float64
	// allocsPerCall is server heap allocations per call in the window; nil when the
	// target exports no allocation counter.
	allocsPerCall *float64
}

// measure starts t, runs w against it (see [measureOn]) and stops it. A process that
// fails to stop cleanly fails the run.
func measure(ctx context.Context, t Target, w load.Workload) (sample, error) {
	inst, err := t.Start(ctx)
	if err != nil {
		return sample{}, err
	}
	s, err := measureOn(ctx, t.Name(), inst, w)
	if err := errors.Join(err, inst.Stop()); err != nil {
		return sample{}, err
	}
	return s, nil
}

// measureOn runs w against a running instance of the target named target while
// sampling the server's CPU time and allocation counter at the edges of the measured
// window. A process of the instance that exits before it is stopped ends the run and is
// its error, whatever the agents saw then.
func measureOn(ctx context.Context, target string, inst *Instance, w load.Workload) (sample, error) {
	ctx, unwatch := inst.watch(ctx)
	defer unwatch()
	m := meter{ctx: ctx, inst: inst}
	m.detect()
	res, err := load.Run(ctx, w, inst.Dial, load.WithWindowHooks(m.open, m.close))
	if exited := inst.earlyExit(); exited != nil {
		return sample{}, exited
	}
	if err != nil {
		return sample{}, err
	}
	m.calibrate()
	if err := errors.Join(m.err, inst.earlyExit()); err != nil {
		return sample{}, err
	}
	s := sample{target: target, result: res}
	if res.Calls > 0 {
		perCall := func(d time.Duration) *float64 {
			v := float64(d) / float64(time.Microsecond) / float64(res.Calls)
			return &v
		}
		if inst.PID != 0 {
			s.cpuPerCall = perCall(m.cpu1.server - m.cpu0.server)
		}
		if inst.ProviderPID != 0 {
			s.providerCPUPerCall = perCall(m.cpu1.provider - m.cpu0.provider)
		}
		s.agentCPUPerCall = perCall(m.cpu1.agents - m.cpu0.agents)
	}
	// The counter's reads bracket the calls completed between them, not the window's.
	if calls := res.CallsBetween(m.read0, m.read1); calls > 0 && m.allocs {
		v := max(m.mallocs1-m.mallocs0-m.scrapeCost, 0) / float64(calls)
		s.allocsPerCall = &v
	}
	return s, nil
}

// meter samples a server process at the edges of the window. Scraping the allocation
// counter allocates in the server too; calibrate measures one scrape's cost at idle after
// the run, when a scrape renders the series the calls created as the window's scrapes
// did, so that it can be subtracted.
type meter struct {
	ctx  context.Context
	inst *Instance

	allocs             bool // the counter is exported
	scrapeCost         float64
	mallocs0, mallocs1 float64
	// read0 and read1 are when the counter was read, as the middle of each scrape: a
	// server's scrape reads it somewhere between the request and its answer, and under
	// load that takes tens of milliseconds.
	read0, read1 time.Time
	cpu0, cpu1   cpuTimes
	err          error
}

// cpuTimes is the CPU time of each process of a run at one instant.
type cpuTimes struct{ server, provider, agents time.Duration }

// detect finds out whether the server exports the allocation counter.
func (m *meter) detect() {
	if m.inst.MetricsURL == "" {
		return
	}
	_, err := scrapeMallocs(m.ctx, m.inst.MetricsURL)
	if errors.Is(err, errNoMetric) {
		return
	}
	m.err = errors.Join(m.err, err)
	m.allocs = err == nil
}

// calibrate measures one scrape's cost with two idle scrapes back to back.
func (m *meter) calibrate() {
	if m.allocs {
		a, b := m.scrape(), m.scrape()
		m.scrapeCost = b - a
	}
}

// open scrapes first and reads CPU last, close the other way round, so that the CPU
// window hugs the call-counting window.
func (m *meter) open() {
	if m.allocs {
		m.mallocs0, m.read0 = m.timedScrape()
	}
	m.cpu0 = m.cpu()
}

func (m *meter) close() {
	m.cpu1 = m.cpu()
	if m.allocs {
		m.mallocs1, m.read1 = m.timedScrape()
	}
}

// timedScrape scrapes the counter and returns it with the middle of the scrape.
func (m *meter) timedScrape() (float64, time.Time) {
	start := time.Now()
	v := m.scrape()
	return v, start.Add(time.Since(start) / 2)
}

func (m *meter) scrape() float64 {
	v, err := scrapeMallocs(m.ctx, m.inst.MetricsURL)
	m.err = errors.Join(m.err, err)
	return v
}

func (m *meter) cpu() cpuTimes {
	read := func(pid int) time.Duration {
		if pid == 0 {
			return 0
		}
		v, err := procstat.CPU(pid)
		m.err = errors.Join(m.err, err)
		return v
	}
	return cpuTimes{server: read(m.inst.PID), provider: read(m.inst.ProviderPID), agents: read(os.Getpid())}
}
