package awsrt

import (
	"context"
	"fmt"
	"github.com/agentclock/clockwork/internal/notify"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/streamfilter"
	"github.com/agentclock/clockwork/internal/watcher"
)

// TestSweepSkipsAPoisonRecordAndStopsBeforeItsDeadline: a backlog of
// expectations past due that no fire processed, with an item in the
// open-instant index that is not a record among them. The sweep skips the
// poison (counted) instead of aborting, stops cleanly when its function's
// deadline comes near (truncated, not failed), and the next run ticks the
// rest: every other expectation lapses.
func TestSweepSkipsAPoisonRecordAndStopsBeforeItsDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: raises a backlog on the emulator; the full run checks it")
	}
	clock := &movableClock{}
	rt, _ := timerRuntime(t, clock, "")
	ctx := context.Background()
	// CLOCKWORK_SWEEP_BACKLOG=5000 measures the backlog (about
	// four minutes on moto); CI sweeps 120.
	n := 120
	if v, err := strconv.Atoi(os.Getenv("CLOCKWORK_SWEEP_BACKLOG")); err == nil && v > 0 {
		n = v
	}
	due := time.Now().Add(time.Minute)
	for i := 0; i < n; i += 50 {
		var es []any
		for j := i; j < min(n, i+50); j++ {
			es = append(es, exp(fmt.Sprintf("b%05d", j), expect.FormatTime(due)))
		}
		call(t, rt.HTTP(), "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": es})
	}
	poison := store.Item{Key: store.Key{PK: "EXP#a1", SK: "poison"}, Type: watcher.TypeExpectation, Data: []byte(`{"not":"a record"`),
		Index: map[store.IndexName]store.IndexKey{store.GSI5: {PK: watcher.OpenPK(0), SK: "2000-01-01T00:00:00Z#a1#poison"}}}
	if err := rt.Store.Commit(ctx, []store.Write{{Put: &poison}}); err != nil {
		t.Fatal(err)
	}
	clock.advance(5 * time.Minute) // past due by more than SweepAfter; no fire came

	// A function with 5.5 s left: the sweep does a little and stops.
	short, cancel := context.WithTimeout(ctx, sweepMargin+500*time.Millisecond)
	res, err := rt.Sweep(short)
	cancel()
	if err != nil {
		t.Fatalf("a sweep near its deadline failed instead of stopping: %v", err)
	}
	if !res.Truncated {
		t.Fatalf("a sweep with %s left did all of %d records: %+v", sweepMargin+500*time.Millisecond, n, res)
	}
	// Runs with time enough finish the backlog, skipping the poison.
	skipped := res.Skipped
	deadline := time.Now().Add(2*time.Minute + time.Duration(n)*50*time.Millisecond)
	// Each run as the clock function runs it: within its timeout.
	runs, lapsedBefore := 0, -1
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		res, err := rt.Sweep(rctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		runs++
		t.Logf("sweep %d: %+v in %s", runs, res, time.Since(start).Round(time.Millisecond))
		skipped += res.Skipped
		lapsed := 0
		for i := range n {
			if state(t, rt, fmt.Sprintf("b%05d", i)) == expect.StateLapsed {
				lapsed++
			}
		}
		if lapsed == n {
			break
		}
		// The poison never stops a run: each one lapses more.
		if lapsed <= lapsedBefore {
			t.Fatalf("sweep %d lapsed nothing more (%d of %d): %+v", runs, lapsed, n, res)
		}
		lapsedBefore = lapsed
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lapsed after the sweeps (last %+v)", lapsed, n, res)
		}
	}
	if skipped == 0 {
		t.Fatal("the poison item was never reported as skipped")
	}
	t.Logf("a backlog of %d with a poison record: all lapsed after %d runs", n, runs)
}

// TestStreamRecordTypes: the stack filters the stream to
// streamfilter.RecordTypes,
// so they must be every type the stream function's change processor acts
// on: expectation records, and each type it has a handler for.
func TestStreamRecordTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a runtime on the emulator; the full run checks it")
	}
	rt, _ := timerRuntime(t, &movableClock{}, "")
	handled := []string{watcher.TypeExpectation}
	for ty := range rt.Feed.Handlers {
		handled = append(handled, ty)
	}
	for _, ty := range notify.HandledTypes {
		if !slices.Contains(handled, ty) {
			handled = append(handled, ty)
		}
	}
	slices.Sort(handled)
	want := slices.Sorted(slices.Values(streamfilter.RecordTypes))
	if !slices.Equal(handled, want) {
		t.Fatalf("the stream function acts on %v, the stack lets %v through", handled, want)
	}
}
