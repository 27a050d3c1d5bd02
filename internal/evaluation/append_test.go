package evaluation

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// countingStore counts commits and the largest one.
type countingStore struct {
	store.Store
	commits, largest atomic.Int64
}

func (s *countingStore) Commit(ctx context.Context, ws []store.Write) error {
	s.commits.Add(1)
	if n := int64(len(ws)); n > s.largest.Load() {
		s.largest.Store(n)
	}
	return s.Store.Commit(ctx, ws)
}

func newAppendService(t *testing.T) (*Service, *countingStore) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "append.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	svc := New(cs, Options{})
	all := func(string) bool { return true }
	for _, plan := range []string{"plan-one", "plan-batch"} {
		var m map[string]any
		if err := json.Unmarshal(anticipation50(t, plan), &m); err != nil {
			t.Fatal(err)
		}
		m["anticipation_id"] = "ant-" + plan
		raw, _ := json.Marshal(m)
		if _, _, err := svc.Declare(context.Background(), signed(t, raw), "test", all); err != nil {
			t.Fatal(err)
		}
	}
	return svc, cs
}

// TestAppendEventsIsAppendEventInOrder: a batch stores the chain that the
// same events appended one by one store (same digests, same answers, the
// same refusals), in commits no larger than the store's limit and far
// fewer than one per event.
func TestAppendEventsIsAppendEventInOrder(t *testing.T) {
	ctx := context.Background()
	caller := Caller{May: func(string) bool { return true }}
	var raws [][]byte
	for i := range 300 {
		switch {
		case i == 7:
			raws = append(raws, []byte(`{"event_id":"bad"}`)) // invalid
		case i == 11:
			raws = append(raws, raws[3]) // a repeat: the stored answer
		case i == 13:
			raws = append(raws, event(3, "STEP_COMPLETE", map[string]any{"other": true})) // reused id, another body
		case i%2 == 0:
			raws = append(raws, event(i, "TOOL_REQUEST", map[string]any{"tool": "t", "arguments": map[string]any{"n": i}}))
		default:
			raws = append(raws, event(i, "TOOL_RESULT", map[string]any{"tool": "t", "status": "SUCCESS"}))
		}
	}
	raws = append(raws, event(1000, "PLAN_COMPLETE", nil), event(1001, "STEP_COMPLETE", nil)) // the last after PLAN_COMPLETE

	one, _ := newAppendService(t)
	var want []EventResult
	for _, raw := range raws {
		a, err := one.AppendEvent(ctx, "plan-one", raw, caller)
		want = append(want, EventResult{Appended: a, Err: err})
	}
	svc, cs := newAppendService(t)
	before := cs.commits.Load()
	got, err := svc.AppendEvents(ctx, "plan-one", raws, caller)
	if err != nil {
		t.Fatal(err)
	}
	commits := cs.commits.Load() - before
	for i := range raws {
		if got[i].Appended != want[i].Appended || errs.CodeOf(got[i].Err) != errs.CodeOf(want[i].Err) {
			t.Fatalf("event %d: batch %+v, one by one %+v", i, got[i], want[i])
		}
	}
	for _, i := range []int{7, 13, len(raws) - 1} {
		if got[i].Err == nil {
			t.Errorf("event %d was not refused", i)
		}
	}
	exOne, _ := one.Execution(ctx, "agent-gandalf-spell-executor-001", "plan-one")
	exBatch, _ := svc.Execution(ctx, "agent-gandalf-spell-executor-001", "plan-one")
	if exOne.Head != exBatch.Head || exOne.Count != exBatch.Count || !exBatch.Completed {
		t.Fatalf("chains differ: one by one %s/%d, batch %s/%d completed %v", exOne.Head, exOne.Count, exBatch.Head, exBatch.Count, exBatch.Completed)
	}
	// 298 events appended, two writes each: at least 6 commits of 100.
	if commits > 10 || cs.largest.Load() > store.MaxCommitWrites {
		t.Fatalf("%d commits, the largest of %d writes: want at most 10, none over %d", commits, cs.largest.Load(), store.MaxCommitWrites)
	}
	t.Logf("%d events in %d commits (largest %d writes)", len(raws), commits, cs.largest.Load())
}

// TestAppendEventsTooLargeAlone: an event the store refuses as too large
// is refused alone; the batch's other events are stored.
func TestAppendEventsTooLargeAlone(t *testing.T) {
	ctx := context.Background()
	svc, cs := newAppendService(t)
	svc.store = refusingStore{Store: cs, marker: "too-large-marker"}
	caller := Caller{May: func(string) bool { return true }}
	raws := [][]byte{
		event(1, "STEP_COMPLETE", nil),
		event(2, "STEP_COMPLETE", map[string]any{"note": "too-large-marker"}),
		event(3, "STEP_COMPLETE", nil),
	}
	got, err := svc.AppendEvents(ctx, "plan-batch", raws, caller)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Err != nil || got[2].Err != nil || got[1].Err == nil || !strings.Contains(got[1].Err.Error(), "too large") {
		t.Fatalf("results %+v", got)
	}
	if got[0].Seq != 1 || got[2].Seq != 2 {
		t.Fatalf("seqs %d, %d: want 1, 2", got[0].Seq, got[2].Seq)
	}
}

func signed(t *testing.T, raw []byte) []byte {
	t.Helper()
	out, err := anticipate.Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAppendEventsRetriedBatch: a batch sent again (an exporter's retry),
// with new events among the old, answers the old ones as stored and
// appends the new ones once; an old id with another body is refused. The
// first attempt of a commit reads no event id, so this is its conflict
// path.
func TestAppendEventsRetriedBatch(t *testing.T) {
	ctx := context.Background()
	svc, cs := newAppendService(t)
	caller := Caller{May: func(string) bool { return true }}
	var first [][]byte
	for i := range 20 {
		first = append(first, event(i, "STEP_COMPLETE", map[string]any{"n": i}))
	}
	stored, err := svc.AppendEvents(ctx, "plan-batch", first, caller)
	if err != nil {
		t.Fatal(err)
	}
	again := append([][]byte{}, first...)
	again = append(again, event(20, "STEP_COMPLETE", nil), event(5, "STEP_COMPLETE", map[string]any{"other": true}))
	before := cs.commits.Load()
	got, err := svc.AppendEvents(ctx, "plan-batch", again, caller)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if got[i].Err != nil || got[i].Appended != stored[i].Appended {
			t.Fatalf("repeat %d: %+v, stored %+v", i, got[i], stored[i])
		}
	}
	if got[20].Err != nil || got[20].Seq != 21 {
		t.Fatalf("the new event: %+v, want seq 21", got[20])
	}
	if errs.CodeOf(got[21].Err) != errs.Conflict {
		t.Fatalf("an old id with another body: %+v", got[21])
	}
	ex, _ := svc.Execution(ctx, "agent-gandalf-spell-executor-001", "plan-batch")
	if ex.Count != 21 {
		t.Fatalf("%d events stored, want 21", ex.Count)
	}
	t.Logf("the retried batch took %d commit attempts", cs.commits.Load()-before)

	// Once the plan is complete, the batch that completed it, sent again,
	// is answered as stored (not refused as after PLAN_COMPLETE).
	done := [][]byte{event(30, "STEP_COMPLETE", nil), event(31, "PLAN_COMPLETE", nil)}
	stored, err = svc.AppendEvents(ctx, "plan-batch", done, caller)
	if err != nil {
		t.Fatal(err)
	}
	got, err = svc.AppendEvents(ctx, "plan-batch", done, caller)
	if err != nil {
		t.Fatal(err)
	}
	for i := range done {
		if got[i].Err != nil || got[i].Appended != stored[i].Appended {
			t.Fatalf("completing batch sent again, event %d: %+v, stored %+v", i, got[i], stored[i])
		}
	}
}
