package timers

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// Source reads open expectations by their next instant: on the embedded
// runtime, the store's open-instant index (gsi5 OPEN shards) read through
// the store port (watcher.Service implements it). Each expectation is
// returned as its current instants (at least one); a page is ordered by
// next instant, and after is the Next token of the previous page of the
// same shard ("" for the first). Errors are the store's.
type Source interface {
	// OpenShards returns the number of partitions of the index.
	OpenShards() int
	// OpenBefore returns one page of the open expectations of shard whose
	// next instant is before the whole second before.
	OpenBefore(ctx context.Context, shard int, before time.Time, after string, limit int) ([][]expect.Instant, string, error)
	// OpenInMinute returns one page of the open expectations of shard
	// whose next instant is within the minute that begins at minute.
	OpenInMinute(ctx context.Context, shard int, minute time.Time, after string, limit int) ([][]expect.Instant, string, error)
}

// DefaultLookahead is how far ahead of now the Window keeps instants loaded.
const DefaultLookahead = 2 * time.Minute

// DefaultPageSize is how many expectations the Window reads per page, and
// how many it hands to the timers before waiting for them during a
// catch-up.
const DefaultPageSize = 500

// Window keeps Timers loaded with a moving window of upcoming instants, so
// that no timer exists for an instant further ahead than the window:
//
//   - Prime sets the window's end, the first whole minute at least
//     Lookahead ahead; from then on Timers.Schedule keeps an expectation's
//     instants only when one of them is before the end.
//   - Run first loads everything before the end (the instants that passed
//     while the process was down, and the first minutes), reading all
//     shards merged, oldest first, a page at a time, and waiting for what
//     is due to be handed to the workers before reading on, so a backlog
//     of any size takes bounded memory. Then, every minute, it moves the
//     end one minute on and loads the expectations whose next instant is in
//     that minute.
//
// The end is moved before the minute is read, so a change committed during
// the read is seen either by the read or by Schedule (which the change feed
// calls after the commit): no instant falls between the two. An instant
// loaded twice is held once; one that went stale meanwhile fires to no
// effect (the watcher decides on the record as it is then).
type Window struct {
	Timers *Timers
	Source Source
	// Lookahead defaults to DefaultLookahead, PageSize to DefaultPageSize.
	Lookahead time.Duration
	PageSize  int
	Log       *slog.Logger

	// SweepAfter is how far past its next instant an open expectation must
	// be for the sweep to tick it (default DefaultSweepAfter); SweepEvery
	// how often the sweep runs once caught up (default DefaultSweepEvery).
	SweepAfter, SweepEvery time.Duration

	end      time.Time
	caughtUp atomic.Bool
	loaded   atomic.Int64
	swept    atomic.Int64
}

// Defaults of the sweep: an instant held by the timers fires within
// milliseconds of its time, so one more than a few seconds past is one
// they never held (a change the feed set aside, an instant dropped by a
// fault not foreseen) and the sweep ticks it.
const (
	DefaultSweepAfter = 5 * time.Second
	DefaultSweepEvery = 10 * time.Second
)

func (w *Window) lookahead() time.Duration {
	if w.Lookahead > 0 {
		return w.Lookahead
	}
	return DefaultLookahead
}

func (w *Window) pageSize() int {
	if w.PageSize > 0 {
		return w.PageSize
	}
	return DefaultPageSize
}

// Prime sets the window's first end and the timers' limit. Call it before
// the change feed starts, so that Schedule holds only the window from the
// first change on; Run primes the window itself when it was not.
func (w *Window) Prime() {
	w.end = WindowEnd(w.Timers.now(), w.lookahead())
	w.Timers.SetLimit(w.end)
}

// End returns the window's end (the timers' limit).
func (w *Window) End() time.Time { return w.Timers.Limit() }

// CaughtUp reports whether the first load (everything due before the first
// end) has finished.
func (w *Window) CaughtUp() bool { return w.caughtUp.Load() }

// Loaded returns how many expectations the window has read from the store.
func (w *Window) Loaded() int64 { return w.loaded.Load() }

// Run loads the window until ctx ends. A failed read is retried after a
// backoff (logged), never skipped.
func (w *Window) Run(ctx context.Context) {
	if w.end.IsZero() {
		w.Prime()
	}
	t0 := time.Now()
	if !w.retry(ctx, "catch up", w.catchUp) {
		return
	}
	w.caughtUp.Store(true)
	w.logInfo("timers caught up", "expectations", w.loaded.Load(), "took", time.Since(t0).String(), "windowEnd", expect.FormatTime(w.end))
	go w.sweepLoop(ctx)
	for {
		if !w.retry(ctx, "advance", w.advance) {
			return
		}
		// Until now+lookahead passes the end (a millisecond after it, so
		// that the next advance has a minute to load).
		if !sleep(ctx, w.end.Add(-w.lookahead()).Sub(w.Timers.now())+time.Millisecond) {
			return
		}
	}
}

// Swept returns how many expectations the sweep found past an instant
// the timers did not hold, since the start.
func (w *Window) Swept() int64 { return w.swept.Load() }

func (w *Window) sweepLoop(ctx context.Context) {
	every := w.SweepEvery
	if every <= 0 {
		every = DefaultSweepEvery
	}
	for sleep(ctx, every) {
		w.retry(ctx, "sweep", func(ctx context.Context) error { _, err := w.Sweep(ctx); return err })
	}
}

// Sweep hands to the timers every open expectation whose next instant is
// more than SweepAfter past on their clock: the repair of whatever kept an
// instant from them (a change the feed set aside, one that failed past its
// retries). It reads the open-instant index a page at a time, waiting for
// what it handed over to be dispatched before reading on, so its memory is
// a page whatever it finds. An instant held or in flight meanwhile is
// ticked twice, to no effect the second time. It returns how many
// expectations it handed over; errors are the store's.
func (w *Window) Sweep(ctx context.Context) (int, error) {
	after := w.SweepAfter
	if after <= 0 {
		after = DefaultSweepAfter
	}
	now := w.Timers.now()
	cutoff := now.Add(-after)
	found := 0
	for shard := range w.Source.OpenShards() {
		token := ""
		for {
			page, next, err := w.Source.OpenBefore(ctx, shard, cutoff, token, w.pageSize())
			if err != nil {
				return found, err
			}
			for _, rec := range page {
				var due []expect.Instant
				for _, in := range rec {
					if !in.At.After(cutoff) {
						due = append(due, in)
					}
				}
				if len(due) > 0 {
					w.Timers.push(due)
					found++
				}
			}
			if len(page) > 0 {
				if err := w.Timers.waitDispatched(ctx, now); err != nil {
					return found, err
				}
			}
			if next == "" {
				break
			}
			token = next
		}
	}
	if found > 0 {
		w.swept.Add(int64(found))
		if w.Log != nil {
			w.Log.Warn("timer sweep found open expectations past an instant the timers did not hold; ticked them", "expectations", found)
		}
	}
	return found, nil
}

// advance moves the end on to WindowEnd(now) a minute at a time, loading
// the expectations whose next instant is in each minute. The limit moves
// before the minute is read (see the type's comment); after a failed read
// the end stays, so the minute is read again.
func (w *Window) advance(ctx context.Context) error {
	for _, m := range MinutesBetween(w.end, WindowEnd(w.Timers.now(), w.lookahead())) {
		next := m.Add(time.Minute)
		w.Timers.SetLimit(next)
		if err := w.loadMinute(ctx, m); err != nil {
			return err
		}
		w.end = next
	}
	return nil
}

func (w *Window) retry(ctx context.Context, what string, f func(context.Context) error) bool {
	backoff := 100 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if w.Log != nil {
			w.Log.Error("timer window: "+what+" failed; retrying", "err", err)
		}
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (w *Window) logInfo(msg string, args ...any) {
	if w.Log != nil {
		w.Log.Info(msg, args...)
	}
}

// catchUp loads every expectation whose next instant is before the end,
// all shards merged oldest first, waiting after each page's worth for the
// due ones to be handed to the workers.
func (w *Window) catchUp(ctx context.Context) error {
	cur := make([]cursor, w.Source.OpenShards())
	n := 0
	for {
		shard, refill, ok := mergeStep(cur)
		if !ok {
			return nil
		}
		c := &cur[shard]
		if refill {
			page, next, err := w.Source.OpenBefore(ctx, shard, w.end, c.next, w.pageSize())
			if err != nil {
				return err
			}
			c.fill(page, next)
			continue
		}
		rec := c.pop()
		w.Timers.pushWithin(rec)
		w.loaded.Add(1)
		if n++; n%w.pageSize() == 0 {
			if err := w.Timers.waitDispatched(ctx, earliest(rec)); err != nil {
				return err
			}
		}
	}
}

// loadMinute loads the expectations whose next instant is in minute m.
func (w *Window) loadMinute(ctx context.Context, m time.Time) error {
	for shard := range w.Source.OpenShards() {
		after := ""
		for {
			page, next, err := w.Source.OpenInMinute(ctx, shard, m, after, w.pageSize())
			if err != nil {
				return err
			}
			for _, rec := range page {
				if len(rec) > 0 {
					w.Timers.pushWithin(rec)
					w.loaded.Add(1)
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	return nil
}

// WindowEnd returns the end of the window for now: the first whole minute
// at or after now+lookahead.
func WindowEnd(now time.Time, lookahead time.Duration) time.Time {
	t := now.Add(lookahead)
	end := t.Truncate(time.Minute)
	if end.Before(t) {
		end = end.Add(time.Minute)
	}
	return end.UTC()
}

// MinutesBetween returns the whole minutes m with from <= m < to, from a
// whole minute; none when to is not after from.
func MinutesBetween(from, to time.Time) []time.Time {
	var out []time.Time
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		out = append(out, m)
	}
	return out
}

// Before returns the instants before limit (all of them for the zero
// limit), in order.
func Before(ins []expect.Instant, limit time.Time) []expect.Instant {
	if limit.IsZero() {
		return ins
	}
	out := make([]expect.Instant, 0, len(ins))
	for _, in := range ins {
		if in.At.Before(limit) {
			out = append(out, in)
		}
	}
	return out
}

// earliest returns the earliest of an expectation's instants (its next).
func earliest(ins []expect.Instant) time.Time {
	var t time.Time
	for i, in := range ins {
		if i == 0 || in.At.Before(t) {
			t = in.At
		}
	}
	return t
}

// cursor is one shard's position in a merged read.
type cursor struct {
	buf  [][]expect.Instant
	next string
	done bool
}

func (c *cursor) fill(page [][]expect.Instant, next string) {
	c.buf = c.buf[:0]
	for _, rec := range page {
		if len(rec) > 0 {
			c.buf = append(c.buf, rec)
		}
	}
	c.next, c.done = next, next == ""
}

func (c *cursor) pop() []expect.Instant {
	rec := c.buf[0]
	c.buf = c.buf[1:]
	return rec
}

// mergeStep decides the next step of a merged read of shards, each read in
// order of next instant: refill the first shard whose buffer is empty and
// that may have more; else take the buffered expectation whose next
// instant is the oldest (the lowest shard on a tie). ok is false when
// every shard is read.
func mergeStep(cur []cursor) (shard int, refill bool, ok bool) {
	for i := range cur {
		if len(cur[i].buf) == 0 && !cur[i].done {
			return i, true, true
		}
	}
	best := -1
	var bestAt time.Time
	for i := range cur {
		if len(cur[i].buf) == 0 {
			continue
		}
		if at := earliest(cur[i].buf[0]); best < 0 || at.Before(bestAt) {
			best, bestAt = i, at
		}
	}
	return best, false, best >= 0
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
