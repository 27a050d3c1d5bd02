package timers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
)

// fireThrough returns timers whose fire ticks the watcher of e, calling
// before first (with the attempt number), and counts the attempts.
func fireThrough(e *storeEnv, before func(n int64)) (*Timers, *atomic.Int64) {
	var calls atomic.Int64
	tm := New(func(ctx context.Context, ins []expect.Instant) ([]expect.Instant, error) {
		before(calls.Add(1))
		return e.svc.TickDue(ctx, ins)
	}, 1, quietTimers(nil).log)
	return tm, &calls
}

func (e *storeEnv) state(id string) expect.State {
	e.t.Helper()
	r, err := e.svc.Get(context.Background(), "a", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.State
}

// TestClockStepsBackBetweenDispatchAndTick: the wall clock steps back (an
// NTP step, a VM resumed) after the timers hand an instant to a worker and
// before the watcher ticks it: the watcher finds it early and changes
// nothing, and the timers arm it again for its time instead of taking it
// as done; when the clock reaches it, it lapses.
func TestClockStepsBackBetweenDispatchAndTick(t *testing.T) {
	e := newStoreEnv(t, "2030-01-01T00:00:00Z")
	e.raise("x", "2030-01-01T00:00:01Z", "")
	tm, calls := fireThrough(e, func(n int64) {
		if n == 1 {
			e.clock.Set("2030-01-01T00:00:00.5Z") // stepped back
		}
	})
	tm.SetClock(e.clock.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tm.Run(ctx)
	r, err := e.svc.Get(ctx, "a", "x")
	if err != nil {
		t.Fatal(err)
	}
	tm.push(expect.Instants(r))
	e.clock.Set("2030-01-01T00:00:01Z")
	tm.Poke()
	waitFor(t, func() bool { return calls.Load() == 1 && tm.Len() == 1 })
	if s := e.state("x"); s != expect.StateOpen {
		t.Fatalf("after the early tick: %s", s)
	}
	e.clock.Set("2030-01-01T00:00:01Z")
	tm.Poke()
	waitFor(t, func() bool { return e.state("x") == expect.StateLapsed })
	if calls.Load() != 2 {
		t.Fatalf("%d ticks, want the early one and the one at its time", calls.Load())
	}
}

// TestWatcherClockBehindTimers: timers on a clock a second ahead of the
// watcher's dispatch an instant the watcher does not yet see as come; it is
// armed again, shortly (its time has passed on the timers' clock), until
// the watcher's clock reaches it.
func TestWatcherClockBehindTimers(t *testing.T) {
	e := newStoreEnv(t, "2030-01-01T00:00:00Z")
	e.raise("y", "2030-01-01T00:00:00.5Z", "")
	tm, calls := fireThrough(e, func(int64) {})
	ahead := &fakeClock{}
	ahead.Set("2030-01-01T00:00:01Z")
	tm.SetClock(ahead.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tm.Run(ctx)
	r, err := e.svc.Get(ctx, "a", "y")
	if err != nil {
		t.Fatal(err)
	}
	tm.push(expect.Instants(r))
	waitFor(t, func() bool { return calls.Load() >= 1 })
	if s := e.state("y"); s != expect.StateOpen {
		t.Fatalf("the watcher's clock has not reached it: %s", s)
	}
	if tm.Len() != 1 {
		t.Fatalf("the early instant is not held again (%d held)", tm.Len())
	}
	e.clock.Set("2030-01-01T00:00:00.5Z")
	ahead.Set("2030-01-01T00:00:02Z")
	tm.Poke()
	waitFor(t, func() bool { return e.state("y") == expect.StateLapsed })
}

// TestSweepTicksWhatTheTimersNeverHeld: an expectation whose instant never
// reached the timers (its change set aside by the feed, say) is found by
// the sweep once more than SweepAfter past, and lapses; one the timers
// hold is left to them, and one not yet that far past is left too.
func TestSweepTicksWhatTheTimersNeverHeld(t *testing.T) {
	e := newStoreEnv(t, "2030-01-01T00:00:00Z")
	tm, _ := fireThrough(e, func(int64) {})
	tm.SetClock(e.clock.Now)
	w := &Window{Timers: tm, Source: e.svc, PageSize: 2}
	w.Prime()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tm.Run(ctx)
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Raised, but never scheduled: the change feed is not run here.
	for _, id := range []string{"lost1", "lost2", "lost3"} {
		e.raise(id, "2030-01-01T00:00:01Z", "")
	}
	e.raise("recent", "2030-01-01T00:00:09Z", "")
	e.clock.Set("2030-01-01T00:00:12Z")
	found, err := w.Sweep(ctx)
	if err != nil || found != 3 {
		t.Fatalf("Sweep found %d (%v), want the three more than 5 s past", found, err)
	}
	for _, id := range []string{"lost1", "lost2", "lost3"} {
		waitFor(t, func() bool { return e.state(id) == expect.StateLapsed })
	}
	if s := e.state("recent"); s != expect.StateOpen {
		t.Fatalf("one only 3 s past was swept: %s", s)
	}
	if found, err := w.Sweep(ctx); err != nil || found != 0 {
		t.Fatalf("a second sweep found %d (%v)", found, err)
	}
	if w.Swept() != 3 {
		t.Fatalf("Swept() = %d", w.Swept())
	}
}

// TestCatchUpOfABacklogWithGraceAheadHoldsTheWindow: after a downtime, 600
// expectations are past due with their grace ends two hours ahead. The
// catch-up ticks each due instant (marking it past due) holding at most a
// page or two of instants at once, and afterwards holds none of the grace
// ends, which are beyond the window: memory is the window's, not the
// backlog's (counted, not timed).
func TestCatchUpOfABacklogWithGraceAheadHoldsTheWindow(t *testing.T) {
	e := newStoreEnv(t, "2029-12-31T23:00:00Z")
	const n = 600
	for i := range n {
		e.raise(fmt.Sprintf("b%03d", i), fmt.Sprintf("2029-12-31T23:%02d:%02dZ", 10+i/60, i%60), "PT2H")
	}
	e.clock.Set("2030-01-01T00:00:00Z") // the restart, after the downtime
	var maxHeld atomic.Int64
	var tm *Timers
	tm = New(func(ctx context.Context, ins []expect.Instant) ([]expect.Instant, error) {
		if l := int64(tm.Len()); l > maxHeld.Load() {
			maxHeld.Store(l)
		}
		return e.svc.TickDue(ctx, ins)
	}, 1, quietTimers(nil).log)
	tm.SetClock(e.clock.Now)
	w := &Window{Timers: tm, Source: e.svc, PageSize: 50}
	w.Prime()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tm.Run(ctx)
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	p := &feed.Processor{Scheduler: tm, Current: e.svc.Get, ScheduleAll: true}
	waitFor(t, func() bool {
		e.feedTo(p) // the ticks' changes: their grace ends are beyond the window
		r, err := e.svc.Get(ctx, "a", fmt.Sprintf("b%03d", n-1))
		return err == nil && r.PastDue && tm.Len() == 0
	})
	for i := range n {
		if r, err := e.svc.Get(ctx, "a", fmt.Sprintf("b%03d", i)); err != nil || !r.PastDue || r.State != expect.StateOpen {
			t.Fatalf("b%03d: %+v %v", i, r, err)
		}
	}
	if m := maxHeld.Load(); m > 100 {
		t.Fatalf("held up to %d instants at once catching up 600 with pages of 50", m)
	}
	if tm.Len() != 0 {
		t.Fatalf("holds %d instants after the catch-up; the grace ends are two hours ahead", tm.Len())
	}
}
