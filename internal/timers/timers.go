// Package timers is the embedded clock adapter: in-process timers for the
// due, grace-end and horizon instants of open expectations. The timers
// themselves are memory only; they are durable because the store is. They
// hold only a window of upcoming instants (Window): the store keeps open
// expectations ordered by their next instant, so the window is loaded from
// it as time advances, the instants that passed while the process was down
// are caught up in the background, oldest first, and every change inside
// the window reaches Schedule through the change feed. Memory and restart
// time therefore depend on the instants of the next few minutes, not on
// how many expectations are open.
package timers

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

type key struct {
	agent, id string
	kind      expect.InstantKind
	at        int64
}

type entry struct {
	in expect.Instant
	k  key
	// fireAt is when the entry is handed to the workers: the instant's
	// time, or later for an instant armed again (an early tick, a failure)
	// whose time has already passed on the timers' clock.
	fireAt time.Time
	index  int
}

type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].fireAt.Before(h[j].fireAt) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *entryHeap) Push(x any)        { e := x.(*entry); e.index = len(*h); *h = append(*h, e) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// FireFunc handles instants that have come, together, and returns those
// that turned out not to have come (on the clock of whoever decides, for a
// tick that arrived early): the timers arm them again. An error makes the
// timers try them all again after a short backoff.
type FireFunc func(ctx context.Context, ins []expect.Instant) (notYet []expect.Instant, err error)

// Rearm is how soon an instant armed again fires when its time has already
// passed on the timers' clock (a clock behind theirs decided it had not
// come): soon, but not in a loop.
const Rearm = 200 * time.Millisecond

// maxSleep bounds one wait of the dispatcher, which counts on the
// monotonic clock a duration computed from wall-clock times: a wall clock
// stepped forward is noticed within it rather than at the earliest held
// instant.
const maxSleep = time.Second

// maxFire bounds the instants one worker hands to FireFunc at once.
const maxFire = 50

// Timers is a timer heap (a min-heap with one dispatcher goroutine and a
// pool of workers) that holds the instants of expectations whose next
// instant is before its limit (see SetLimit and Window).
type Timers struct {
	fire    FireFunc
	now     func() time.Time
	log     *slog.Logger
	workers int

	mu    sync.Mutex
	h     entryHeap
	byKey map[key]*entry
	limit time.Time
	wake  chan struct{}
	work  chan expect.Instant

	// Lateness, when set, receives how late each instant fired.
	Lateness func(time.Duration)
}

// New returns timers that call fire for each instant that has come, from
// workers goroutines, on the clock time.Now (SetClock changes it).
func New(fire FireFunc, workers int, log *slog.Logger) *Timers {
	if workers < 1 {
		workers = 1
	}
	return &Timers{fire: fire, now: time.Now, log: log, workers: workers,
		byKey: map[key]*entry{}, wake: make(chan struct{}, 1), work: make(chan expect.Instant, 4096)}
}

// SetClock makes now the timers' clock: give them the clock of whoever
// decides whether an instant has come (the watcher's), so that the two do
// not disagree. Call it before Run.
func (t *Timers) SetClock(now func() time.Time) { t.now = now }

// Poke makes the dispatcher look at the clock now (tests that step a clock
// use it; the dispatcher looks at least every maxSleep anyway).
func (t *Timers) Poke() { t.signal() }

func keyOf(in expect.Instant) key {
	return key{agent: in.AgentID, id: in.ExpectationID, kind: in.Kind, at: in.At.UnixNano()}
}

// SetLimit sets the end of the window the timers hold: from now on
// Schedule keeps only instants before limit (the Window loads the later
// ones from the store when it gets there: an expectation's next instant
// is always in the store's open-instant index). The zero limit, the
// default, keeps every instant. Instants already held stay.
func (t *Timers) SetLimit(limit time.Time) {
	t.mu.Lock()
	t.limit = limit
	t.mu.Unlock()
}

// Limit returns the end of the window (zero: no limit).
func (t *Timers) Limit() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limit
}

// Schedule adds the instants before the limit; one already scheduled is
// ignored, and those at or after the limit are left to the Window, which
// loads each when its minute comes. Memory is therefore the window's
// instants, whatever is open or overdue. Give it all of an expectation's
// current instants at once (feed.Processor.ScheduleAll). It never fails.
func (t *Timers) Schedule(_ context.Context, ins []expect.Instant) error {
	t.pushWithin(ins)
	return nil
}

// pushWithin adds the instants before the limit.
func (t *Timers) pushWithin(ins []expect.Instant) {
	t.mu.Lock()
	t.pushLocked(Before(ins, t.limit))
	t.mu.Unlock()
	t.signal()
}

// push adds instants whatever the limit.
func (t *Timers) push(ins []expect.Instant) {
	t.mu.Lock()
	t.pushLocked(ins)
	t.mu.Unlock()
	t.signal()
}

func (t *Timers) pushLocked(ins []expect.Instant) {
	t.pushAtLocked(ins, time.Time{})
}

// pushAtLocked adds instants to fire at their time, or not before notBefore.
func (t *Timers) pushAtLocked(ins []expect.Instant, notBefore time.Time) {
	for _, in := range ins {
		k := keyOf(in)
		if _, ok := t.byKey[k]; ok {
			continue
		}
		e := &entry{in: in, k: k, fireAt: in.At}
		if e.fireAt.Before(notBefore) {
			e.fireAt = notBefore
		}
		t.byKey[k] = e
		heap.Push(&t.h, e)
	}
}

func (t *Timers) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// waitDispatched blocks until no held instant at or before upTo (and
// already due) is left to hand to the workers, or ctx ends. The Window's
// catch-up uses it to hold only a bounded part of a backlog at once.
func (t *Timers) waitDispatched(ctx context.Context, upTo time.Time) error {
	for {
		t.mu.Lock()
		waiting := len(t.h) > 0 && !t.h[0].in.At.After(upTo) && !t.h[0].fireAt.After(t.now())
		t.mu.Unlock()
		if !waiting {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Cancel removes instants; unknown ones are ignored. It never fails.
func (t *Timers) Cancel(_ context.Context, ins []expect.Instant) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range ins {
		k := keyOf(in)
		if e, ok := t.byKey[k]; ok {
			heap.Remove(&t.h, e.index)
			delete(t.byKey, k)
		}
	}
	return nil
}

// Pending returns the pending instants, in no particular order.
func (t *Timers) Pending() []expect.Instant {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]expect.Instant, 0, len(t.h))
	for _, e := range t.h {
		out = append(out, e.in)
	}
	return out
}

// Len returns the number of pending instants.
func (t *Timers) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.h)
}

// Run dispatches instants as they come until ctx ends, then waits for the
// workers to finish what they started.
func (t *Timers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < t.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range t.work {
				batch := []expect.Instant{in}
			drain:
				for len(batch) < maxFire {
					select {
					case more, ok := <-t.work:
						if !ok {
							break drain
						}
						batch = append(batch, more)
					default:
						break drain
					}
				}
				t.handle(ctx, batch)
			}
		}()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		var due []expect.Instant
		now := t.now()
		for len(t.h) > 0 && !t.h[0].fireAt.After(now) && len(due) < 1024 {
			e := heap.Pop(&t.h).(*entry)
			delete(t.byKey, e.k)
			due = append(due, e.in)
		}
		wait := maxSleep
		if len(t.h) > 0 {
			wait = min(maxSleep, t.h[0].fireAt.Sub(now))
		}
		t.mu.Unlock()
		for _, in := range due {
			if t.Lateness != nil {
				t.Lateness(now.Sub(in.At))
			}
			select {
			case t.work <- in:
			case <-ctx.Done():
				close(t.work)
				wg.Wait()
				return
			}
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			close(t.work)
			wg.Wait()
			return
		case <-t.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (t *Timers) handle(ctx context.Context, ins []expect.Instant) {
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		notYet, err := t.fire(ctx, ins)
		if err == nil {
			if len(notYet) > 0 {
				// Early: armed again for their time, or shortly when
				// that has passed on this clock.
				t.log.Info("instants ticked early; armed again", "count", len(notYet))
				t.pushAt(notYet, t.now().Add(Rearm))
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt >= 8 {
			// Give the instants back to the heap rather than lose them
			// (whatever the limit: they were already loaded), unchanged,
			// so a Cancel from the feed still finds them.
			t.log.Error("instants failed repeatedly; rescheduling", "count", len(ins), "err", err)
			t.pushAt(ins, t.now().Add(5*time.Second))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// pushAt adds instants whatever the limit, to fire at their time or not
// before notBefore.
func (t *Timers) pushAt(ins []expect.Instant, notBefore time.Time) {
	t.mu.Lock()
	t.pushAtLocked(ins, notBefore)
	t.mu.Unlock()
	t.signal()
}
