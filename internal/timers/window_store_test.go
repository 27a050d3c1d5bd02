package timers

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/watcher"
)

// The window is tested on the real embedded store: the watcher raises
// expectations into bbolt and the window reads them back through the store
// port's index query, on a clock the test moves.

var testCard = fmt.Sprintf(`{"name":"w","description":"window test agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(s string)   { c.mu.Lock(); c.now = at(s); c.mu.Unlock() }

type storeEnv struct {
	t     *testing.T
	clock *fakeClock
	svc   *watcher.Service
	st    *bolt.Store
}

func newStoreEnv(t *testing.T, now string) *storeEnv {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &fakeClock{}
	clock.Set(now)
	svc := watcher.New(st, clock.Now, expect.DefaultConfig())
	if _, err := svc.PutCard(context.Background(), "a", []byte(testCard)); err != nil {
		t.Fatal(err)
	}
	return &storeEnv{t: t, clock: clock, svc: svc, st: st}
}

// raise raises expectation id due at due (with grace, "" for none).
func (e *storeEnv) raise(id, due, grace string) {
	e.t.Helper()
	x := expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id}, Expects: "paid",
		SatisfiedBy: expect.SatisfiedBy{FactKey: "paid." + id}, DueAt: due, Grace: grace, Basis: "contract"}
	if _, err := e.svc.Raise(context.Background(), "a", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{x}}); err != nil {
		e.t.Fatal(err)
	}
}

// feedTo processes the store's unprocessed changes with p.
func (e *storeEnv) feedTo(p *feed.Processor) {
	e.t.Helper()
	if err := feed.Drain(context.Background(), e.st, p); err != nil {
		e.t.Fatal(err)
	}
}

func held(tm *Timers) []string { return keys(tm.Pending()) }

// TestWindowCatchUpOldestFirstThenMinuteByMinute: after a restart the
// window fires what passed while down oldest first, holds only the
// expectations whose next instant is before its end, and loads each next
// minute as the clock reaches it; a change the feed reports inside the
// window is held at once, one beyond it waits for its minute.
func TestWindowCatchUpOldestFirstThenMinuteByMinute(t *testing.T) {
	e := newStoreEnv(t, "2030-01-01T00:00:30Z")
	// Raised "before the restart", spread over the shards of the index.
	for i, due := range []string{"2029-12-31T23:50:00Z", "2029-12-31T23:55:00Z", "2030-01-01T00:00:29Z", "2029-12-31T23:59:00Z", "2029-12-31T23:59:00.5Z"} {
		e.raise(fmt.Sprintf("old%d", i), due, "")
	}
	e.raise("near", "2030-01-01T00:00:45Z", "PT1H")
	e.raise("edge", "2030-01-01T00:03:00Z", "")
	e.raise("m3", "2030-01-01T00:03:59.9Z", "PT10M")
	e.raise("far", "2030-01-01T01:00:00Z", "")
	for i := range 20 {
		e.raise(fmt.Sprintf("bulk%02d", i), fmt.Sprintf("2030-01-01T02:%02d:00Z", i), "")
	}

	var mu sync.Mutex
	var fired []string
	tm := New(func(ctx context.Context, ins []expect.Instant) ([]expect.Instant, error) {
		mu.Lock()
		for _, in := range ins {
			fired = append(fired, in.ExpectationID)
		}
		mu.Unlock()
		return e.svc.TickDue(ctx, ins)
	}, 1, quietTimers(nil).log)
	tm.now = e.clock.Now
	w := &Window{Timers: tm, Source: e.svc, PageSize: 2}
	w.Prime()
	if !w.End().Equal(at("2030-01-01T00:03:00Z")) {
		t.Fatalf("end %s", w.End())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tm.Run(ctx); close(done) }()
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// The catch-up waits only for what is due; wait for the worker too,
	// until its ticks are committed (fired is noted before the commit, and
	// stopping the timers cancels a tick still under way).
	waitFor(t, func() bool {
		mu.Lock()
		n := len(fired)
		mu.Unlock()
		if n != 5 {
			return false
		}
		for _, id := range []string{"old0", "old1", "old2", "old3", "old4"} {
			if r, err := e.svc.Get(context.Background(), "a", id); err != nil || r.State != expect.StateLapsed {
				return false
			}
		}
		return true
	})
	cancel()
	<-done
	mu.Lock()
	if want := []string{"old0", "old1", "old3", "old4", "old2"}; !slices.Equal(fired, want) {
		t.Fatalf("caught up %v, want oldest first %v", fired, want)
	}
	mu.Unlock()
	// Only instants inside the window are held: near's grace end (01:00)
	// is read when its minute comes, as the expectation's next instant
	// once its due instant has fired (the timers are stopped here, so it
	// never does, and the grace end is never held below).
	if got, want := held(tm), []string{"near/due"}; !slices.Equal(got, want) {
		t.Fatalf("held after catch-up %v, want %v", got, want)
	}

	p := &feed.Processor{Scheduler: tm, Current: e.svc.Get, ScheduleAll: true}
	e.feedTo(p) // the raises and lapses above: nothing beyond the end is held
	if got, want := held(tm), []string{"near/due"}; !slices.Equal(got, want) {
		t.Fatalf("held after the feed %v, want %v", got, want)
	}

	for _, step := range []struct {
		now   string
		raise [][3]string // raised after the move, processed by the feed
		end   string
		want  []string
	}{
		// 00:03 is within two minutes: that minute is loaded.
		{"2030-01-01T00:01:00.001Z", nil, "2030-01-01T00:04:00Z",
			[]string{"edge/grace", "m3/due", "near/due"}},
		// Inside the window: held at once; beyond: not yet.
		{"2030-01-01T00:01:30Z", [][3]string{{"inside", "2030-01-01T00:03:10Z", ""}, {"beyond", "2030-01-01T00:04:00Z", ""}}, "2030-01-01T00:04:00Z",
			[]string{"edge/grace", "inside/grace", "m3/due", "near/due"}},
		{"2030-01-01T00:02:00Z", nil, "2030-01-01T00:04:00Z",
			[]string{"edge/grace", "inside/grace", "m3/due", "near/due"}},
		// Minutes are loaded in turn, however many passed.
		{"2030-01-01T02:05:00Z", nil, "2030-01-01T02:07:00Z",
			[]string{"beyond/grace", "bulk00/grace", "bulk01/grace", "bulk02/grace", "bulk03/grace", "bulk04/grace", "bulk05/grace", "bulk06/grace",
				"edge/grace", "far/grace", "inside/grace", "m3/due", "near/due"}},
	} {
		e.clock.Set(step.now)
		if err := w.advance(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, r := range step.raise {
			e.raise(r[0], r[1], r[2])
		}
		e.feedTo(p)
		if !w.End().Equal(at(step.end)) || !w.end.Equal(at(step.end)) {
			t.Fatalf("at %s: end %s, want %s", step.now, w.End(), step.end)
		}
		if got := held(tm); !slices.Equal(got, step.want) {
			t.Fatalf("at %s: held %v\nwant %v", step.now, got, step.want)
		}
	}
}

// TestScheduleAllLearnsLaterInstants: the window holds an expectation's
// due instant but not its grace end, which is beyond the end. When the due
// instant passes, the change adds no instant; only ScheduleAll gives the
// timers the grace end, which the index no longer offers the window (the
// expectation's next instant was read before).
func TestScheduleAllLearnsLaterInstants(t *testing.T) {
	for _, all := range []bool{true, false} {
		t.Run(fmt.Sprintf("ScheduleAll=%v", all), func(t *testing.T) {
			e := newStoreEnv(t, "2030-01-01T00:00:00Z")
			e.raise("e", "2030-01-01T00:01:00Z", "PT2M")
			tm := quietTimers(nil)
			tm.now = e.clock.Now
			p := &feed.Processor{Scheduler: tm, Current: e.svc.Get, ScheduleAll: all}
			tm.SetLimit(at("2030-01-01T00:02:00Z"))
			e.feedTo(p)
			// Held whole (an instant is before the limit); drop the grace end
			// as an older store might have left it.
			tm.Cancel(context.Background(), []expect.Instant{inst("a", "e", expect.InstantGrace, "2030-01-01T00:03:00Z")})
			if got, want := held(tm), []string{"e/due"}; !slices.Equal(got, want) {
				t.Fatalf("held %v, want %v", got, want)
			}
			tm.SetLimit(at("2030-01-01T00:04:00Z"))
			e.clock.Set("2030-01-01T00:01:00Z")
			if err := e.svc.Tick(context.Background(), inst("a", "e", expect.InstantDue, "2030-01-01T00:01:00Z")); err != nil {
				t.Fatal(err)
			}
			e.feedTo(p)
			want := []string(nil)
			if all {
				want = []string{"e/grace"}
			}
			if got := held(tm); !slices.Equal(got, want) {
				t.Fatalf("held %v after the due instant passed, want %v", got, want)
			}
		})
	}
}

// TestCatchUpHoldsABoundedPart: a backlog far larger than a page is caught
// up with at most about a page of due instants held at once.
func TestCatchUpHoldsABoundedPart(t *testing.T) {
	if testing.Short() {
		t.Skip("raises 600 expectations")
	}
	e := newStoreEnv(t, "2030-01-01T00:00:00Z")
	const n = 600
	for i := range n {
		e.raise(fmt.Sprintf("x%03d", i), fmt.Sprintf("2029-12-31T23:%02d:%02dZ", i/60, i%60), "")
	}
	var maxHeld, fired atomic.Int64
	var tm *Timers
	tm = New(func(_ context.Context, ins []expect.Instant) ([]expect.Instant, error) {
		if l := int64(tm.Len()); l > maxHeld.Load() {
			maxHeld.Store(l)
		}
		fired.Add(int64(len(ins)))
		return nil, nil
	}, 1, quietTimers(nil).log)
	tm.now = e.clock.Now
	w := &Window{Timers: tm, Source: e.svc, PageSize: 50}
	w.Prime()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tm.Run(ctx)
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return fired.Load() == n })
	if m := maxHeld.Load(); m > 100 {
		t.Fatalf("held up to %d instants at once with pages of 50", m)
	}
	if w.Loaded() != n {
		t.Fatalf("loaded %d, want %d", w.Loaded(), n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
