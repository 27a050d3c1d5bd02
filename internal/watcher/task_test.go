package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/watcher"
)

// beforeFirstCommit runs before once, just before the first commit made
// through it.
type beforeFirstCommit struct {
	store.Store
	once   sync.Once
	before func()
}

func (s *beforeFirstCommit) Commit(ctx context.Context, ws []store.Write) error {
	s.once.Do(s.before)
	return s.Store.Commit(ctx, ws)
}

// TestTaskCancelRacesARaise: a raise for a task has read that the task is
// not canceled, and the whole cancellation runs before the raise commits
// (its lookup cannot see the raise's expectation). The change feed then
// withdraws that expectation like the task's others. A raise after the
// cancellation is refused (409 naming taskId), and a retry of a raise made
// before is answered as before. Before, the raced expectation stayed open
// for good.
func TestTaskCancelRacesARaise(t *testing.T) {
	ctx := context.Background()
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	now := func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) }
	svc := watcher.New(bs, now, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "agent-1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	raise := func(svc *watcher.Service, ids ...string) error {
		var es []expect.Expectation
		for _, id := range ids {
			es = append(es, expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id},
				Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "invoice." + id}, DueAt: "2026-03-02T09:00:00Z", Basis: "contract"})
		}
		_, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "task-9", ContextID: "c-1", Expectations: es})
		return err
	}
	if err := raise(svc, "first"); err != nil {
		t.Fatal(err)
	}
	racing := &beforeFirstCommit{Store: bs}
	racing.before = func() {
		if _, err := svc.TaskCanceled(ctx, "agent-1", "task-9"); err != nil {
			t.Errorf("the cancellation: %v", err)
		}
	}
	if err := raise(watcher.New(racing, now, expect.DefaultConfig()), "raced"); err != nil {
		t.Fatalf("the raise racing the cancellation: %v", err)
	}
	state := func(id string) expect.State {
		r, err := svc.Get(ctx, "agent-1", id)
		if err != nil {
			t.Fatal(err)
		}
		return r.State
	}
	if state("first") != expect.StateWithdrawn || state("raced") != expect.StateOpen {
		t.Fatalf("before the feed: first %s, raced %s; the race did not happen as staged", state("first"), state("raced"))
	}
	// The change feed, as each runtime runs it.
	if err := feed.Drain(ctx, bs, &feed.Processor{Watcher: svc, Tasks: svc}); err != nil {
		t.Fatal(err)
	}
	if got := state("raced"); got != expect.StateWithdrawn {
		t.Fatalf("raced is %s once the feed processed its raise, want withdrawn", got)
	}
	err = raise(svc, "after")
	if !errs.Is(err, errs.Conflict) {
		t.Fatalf("a raise after the cancellation: %v, want a conflict", err)
	}
	if e, ok := err.(*errs.Error); !ok || len(e.Fields) != 1 || e.Fields[0].Path != "taskId" {
		t.Fatalf("the refusal names %v, want taskId", err)
	}
	if err := raise(svc, "first"); err != nil {
		t.Fatalf("a retry of a raise made before the cancellation: %v", err)
	}
}

// failAfter fails every commit after the first n made through it.
type failAfter struct {
	store.Store
	n, made int
}

func (s *failAfter) Commit(ctx context.Context, ws []store.Write) error {
	if s.made++; s.made > s.n {
		return errors.New("cut off")
	}
	return s.Store.Commit(ctx, ws)
}

// TestFeedWithdrawsWithoutWaitingForTheCancellation: while a task's
// cancellation is under way (here cut off after its mark), the change feed
// withdraws the task's new expectation at once, never asking to be retried
// later; the cancellation, done again, names it in its answer.
func TestFeedWithdrawsWithoutWaitingForTheCancellation(t *testing.T) {
	ctx := context.Background()
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	now := func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) }
	svc := watcher.New(bs, now, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "agent-1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	// 150 expectations: more than a hundred for the feed to note.
	for b := range 3 {
		var es []expect.Expectation
		for i := range 50 {
			id := fmt.Sprintf("x-%03d", b*50+i)
			es = append(es, expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id},
				Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "invoice." + id}, DueAt: "2026-03-02T09:00:00Z", Basis: "contract"})
		}
		if _, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "task-7", ContextID: "c-1", Expectations: es}); err != nil {
			t.Fatal(err)
		}
	}
	cut := watcher.New(&failAfter{Store: bs, n: 1}, now, expect.DefaultConfig())
	if _, err := cut.TaskCanceled(ctx, "agent-1", "task-7"); err == nil {
		t.Fatal("the cancellation was not cut off after its mark")
	}
	// One pass of the feed, no retries: it must not ask to wait.
	changes, err := bs.ReadFeed(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	p := &feed.Processor{Watcher: svc, Tasks: svc}
	for _, ch := range changes {
		if err := p.Handle(ctx, ch); err != nil {
			t.Fatalf("the feed was asked to retry: %v", err)
		}
	}
	if r, _ := svc.Get(ctx, "agent-1", "x-149"); r.State != expect.StateWithdrawn {
		t.Fatalf("x-149 is %s after the feed, want withdrawn", r.State)
	}
	got, err := svc.TaskCanceled(ctx, "agent-1", "task-7")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 {
		t.Fatalf("the cancellation's answer: %d records, want the 150 the feed withdrew", len(got))
	}
	if again, err := svc.TaskCanceled(ctx, "agent-1", "task-7"); err != nil || len(again) != 0 {
		t.Fatalf("a cancellation repeated once swept: %d records, %v", len(again), err)
	}
}
