package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolsd/toolsd/internal/scheduler"
	"github.com/toolsd/toolsd/internal/tool"
)

// logEvent is one event the fake log recorded.
type logEvent struct {
	Seq     uint64
	Kind    string // "call", "result" or "context"
	Index   int    // the call's index in the batch (calls and results)
	CallID  string
	Cites   uint64 // result: its call's seq; context: its result's seq
	Result  tool.Result
	Context string
}

// fakeLog is an in-memory [scheduler.Log] that checks the scheduler's side of the contract.
type fakeLog struct {
	failCalls    error
	failResults  error // returned by AppendResults number failResultsAt (1-based; 0 means the first)
	failAt       int
	failContexts error
	// panicCalls and panicContexts make AppendCalls and AppendContexts panic.
	panicCalls, panicContexts bool
	// maxContent, when set, refuses (ErrResultTooLarge) an append with a longer content.
	maxContent int
	// onResults, when set, runs (outside the lock) at the start of AppendResults number n.
	onResults func(n int)

	mu       sync.Mutex
	seq      uint64
	events   []logEvent
	callSeqs []uint64
	batches  [][]int // indices of each AppendResults call
	next     int     // next result index expected
	problems []string
}

var _ scheduler.Log = (*fakeLog)(nil)

func (l *fakeLog) problem(format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *fakeLog) AppendCalls(ctx context.Context, b *scheduler.Batch) ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		l.problem("AppendCalls with a cancelled context")
	}
	if l.panicCalls {
		panic("store broke")
	}
	if l.failCalls != nil {
		return nil, l.failCalls
	}
	seqs := make([]uint64, len(b.Calls))
	for i, c := range b.Calls {
		l.seq++
		seqs[i] = l.seq
		l.events = append(l.events, logEvent{Seq: l.seq, Kind: "call", Index: i, CallID: c.CallID})
	}
	l.callSeqs = append(l.callSeqs, seqs...)
	return seqs, nil
}

func (l *fakeLog) AppendResults(ctx context.Context, _ *scheduler.Batch, rs []scheduler.Committed) ([]uint64, error) {
	l.mu.Lock()
	n := len(l.batches) + 1
	l.mu.Unlock()
	if l.onResults != nil {
		l.onResults(n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		l.problem("AppendResults with a cancelled context")
	}
	idx := make([]int, len(rs))
	for k, r := range rs {
		idx[k] = r.Index
	}
	l.batches = append(l.batches, idx)
	if l.failResults != nil && (l.failAt == 0 || l.failAt == n) {
		return nil, l.failResults
	}
	for _, r := range rs {
		if l.maxContent > 0 && len(r.Result.Content) > l.maxContent {
			return nil, fmt.Errorf("%w: %d bytes", scheduler.ErrResultTooLarge, len(r.Result.Content))
		}
	}
	if len(rs) == 0 {
		l.problem("AppendResults with no results")
	}
	seqs := make([]uint64, len(rs))
	for k, r := range rs {
		if r.Index != l.next {
			l.problem("AppendResults index %d, want %d (model order)", r.Index, l.next)
		}
		l.next = r.Index + 1
		if r.Index < 0 || r.Index >= len(l.callSeqs) || r.CallSeq != l.callSeqs[r.Index] {
			l.problem("AppendResults index %d cites call seq %d", r.Index, r.CallSeq)
		}
		l.seq++
		seqs[k] = l.seq
		l.events = append(l.events, logEvent{Seq: l.seq, Kind: "result", Index: r.Index, Cites: r.CallSeq, Result: r.Result})
	}
	return seqs, nil
}

func (l *fakeLog) AppendContexts(ctx context.Context, _ *scheduler.Batch, resultSeq uint64, contexts []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		l.problem("AppendContexts with a cancelled context")
	}
	if l.panicContexts {
		panic("store broke")
	}
	if l.failContexts != nil {
		return l.failContexts
	}
	for _, c := range contexts {
		l.seq++
		l.events = append(l.events, logEvent{Seq: l.seq, Kind: "context", Cites: resultSeq, Context: c})
	}
	return nil
}

// durable reports whether seq has been appended.
func (l *fakeLog) durable(seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return seq != 0 && seq <= l.seq
}

// snapshot returns the events by kind.
func (l *fakeLog) snapshot() (calls, results, contexts []logEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		switch e.Kind {
		case "call":
			calls = append(calls, e)
		case "result":
			results = append(results, e)
		default:
			contexts = append(contexts, e)
		}
	}
	return calls, results, contexts
}

// checkComplete fails t unless the log holds n calls, then exactly one result per call in
// model order citing its call, with no problems; it returns the results by index.
func (l *fakeLog) checkComplete(t *testing.T, n int) []tool.Result {
	t.Helper()
	l.mu.Lock()
	problems := append([]string(nil), l.problems...)
	l.mu.Unlock()
	for _, p := range problems {
		t.Errorf("log: %s", p)
	}
	calls, results, _ := l.snapshot()
	if len(calls) != n || len(results) != n {
		t.Fatalf("log holds %d calls and %d results, want %d of each", len(calls), len(results), n)
	}
	out := make([]tool.Result, n)
	for i := range n {
		if calls[i].Index != i || results[i].Index != i || results[i].Cites != calls[i].Seq {
			t.Errorf("log event %d: call %+v, result index %d citing %d", i, calls[i], results[i].Index, results[i].Cites)
		}
		if calls[i].Seq >= results[0].Seq {
			t.Errorf("call %d logged at seq %d, after the first result (seq %d)", i, calls[i].Seq, results[0].Seq)
		}
		out[i] = results[i].Result
	}
	return out
}

// delivery is one sink.Result call.
type delivery struct {
	Index              int
	CallSeq, ResultSeq uint64
	Result             tool.Result
}

// fakeSink records deliveries and checks each was durable first.
type fakeSink struct {
	log    *fakeLog
	failAt int // 1-based delivery that fails; 0 never
	// onResult, when set, runs after delivery number n was recorded.
	onResult func(n int)

	mu         sync.Mutex
	deliveries []delivery
	progress   []tool.Progress
	problems   []string
}

var _ scheduler.Sink = (*fakeSink)(nil)

func (s *fakeSink) Result(index int, callSeq, resultSeq uint64, r tool.Result) error {
	durable := s.log == nil || s.log.durable(resultSeq)
	s.mu.Lock()
	if !durable {
		s.problems = append(s.problems, fmt.Sprintf("result %d delivered before seq %d was durable", index, resultSeq))
	}
	if s.failAt > 0 && len(s.deliveries) >= s.failAt {
		s.problems = append(s.problems, fmt.Sprintf("result %d delivered after the sink failed", index))
	}
	s.deliveries = append(s.deliveries, delivery{index, callSeq, resultSeq, r})
	n := len(s.deliveries)
	s.mu.Unlock()
	if s.onResult != nil {
		s.onResult(n)
	}
	if n == s.failAt {
		return errSinkGone
	}
	return nil
}

func (s *fakeSink) Progress(p tool.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress = append(s.progress, p)
}

func (s *fakeSink) got() ([]delivery, []tool.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.deliveries...), append([]tool.Progress(nil), s.progress...)
}

func (s *fakeSink) checkProblems(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Errorf("sink: %s", p)
	}
	s.problems = nil
}

var (
	errSinkGone = errors.New("sink: client gone")
	errDisk     = errors.New("disk on fire")
)

// newBatch returns a batch of n calls named tool-i with ids call-i.
func newBatch(n int) *scheduler.Batch {
	b := &scheduler.Batch{SessionID: "s1", Scope: "agent", BatchID: "b1", ToolSetID: "ts1", Turn: 2, Step: 3}
	for i := range n {
		b.Calls = append(b.Calls, tool.Call{
			CallID:    fmt.Sprintf("call-%d", i),
			Name:      fmt.Sprintf("tool-%d", i),
			Arguments: fmt.Sprintf(`{"i":%d}`, i),
		})
	}
	return b
}

// okResult is the result the test runners return for call i.
func okResult(i int) tool.Result {
	return tool.Result{Content: fmt.Sprintf("ok %d", i)}
}

// modes is a [scheduler.Moder] backed by a table that tests may change while a batch runs.
type modes struct {
	mu    sync.Mutex
	mode  map[int]tool.Mode // by call index; absent means parallel
	asked []int             // call indices in the order their mode was read
	// onAsk, when set, runs (outside the lock) when call i's mode is read.
	onAsk func(i int)
}

func (m *modes) Mode(_ context.Context, e *tool.Exec) tool.Mode {
	if m.onAsk != nil {
		m.onAsk(e.Index)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, e.Index)
	return m.mode[e.Index]
}

func (m *modes) set(i int, mode tool.Mode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mode == nil {
		m.mode = map[int]tool.Mode{}
	}
	m.mode[i] = mode
}

// abortedBeforeDispatch is the synthetic result the scheduler gives an unstarted call.
func abortedBeforeDispatch(name string) tool.Result {
	r := tool.Failure(tool.CodeAbortedBeforeDispatch, "call was cancelled before it started")
	r.Err.Tool = name
	return r
}

// tracker measures how calls overlap, from inside the runner.
type tracker struct {
	active    atomic.Int64 // calls inside Run
	starts    atomic.Int64 // calls that ever entered Run
	maxActive atomic.Int64

	mu       sync.Mutex
	problems []string
}

// begin records a call entering Run and returns the token end needs.
func (tr *tracker) begin(i int, exclusive bool) int64 {
	a := tr.active.Add(1)
	s := tr.starts.Add(1)
	for m := tr.maxActive.Load(); a > m && !tr.maxActive.CompareAndSwap(m, a); m = tr.maxActive.Load() {
	}
	if exclusive && a != 1 {
		tr.problem("exclusive call %d started with %d other calls running", i, a-1)
	}
	return s
}

// end records a call leaving Run; an exclusive call checks nobody started meanwhile.
func (tr *tracker) end(i int, exclusive bool, token int64) {
	if exclusive && tr.starts.Load() != token {
		tr.problem("%d calls started while exclusive call %d ran", tr.starts.Load()-token, i)
	}
	tr.active.Add(-1)
}

func (tr *tracker) problem(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.problems = append(tr.problems, fmt.Sprintf(format, args...))
}

func (tr *tracker) check(t *testing.T) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.problems {
		t.Error(p)
	}
}

// waitFor polls cond until it holds, failing t after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// stuck is how long a blocked test runner waits before giving up, so that a scheduler
// bug fails the test instead of hanging it.
const stuck = 10 * time.Second

// await blocks on ch or ctx; it reports false (and the runner should return a marker
// result) if neither comes in time.
func await(ctx context.Context, ch <-chan struct{}) bool {
	t := time.NewTimer(stuck)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// eventLog records "start i", "end i" and "mode i" as they happen.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (e *eventLog) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, fmt.Sprintf(format, args...))
}

// pos returns the position of ev, or -1.
func (e *eventLog) pos(ev string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Index(e.events, ev)
}

func (e *eventLog) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}
