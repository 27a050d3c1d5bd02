package outbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/watcher"
)

// heldSender counts its sends and holds the first until released.
type heldSender struct {
	sends   atomic.Int64
	release chan struct{}
}

func (s *heldSender) Send(ctx context.Context, _ expect.Card, _ a2aout.Message) (string, error) {
	if s.sends.Add(1) == 1 {
		<-s.release
	}
	return "task-1", nil
}

// lapsed returns a watcher whose agent a1 has one lapsed expectation, e1,
// awaiting delivery, and the watcher's clock.
func lapsed(t *testing.T) (*watcher.Service, *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "o.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &atomic.Int64{}
	t0 := time.Now().UTC().Truncate(time.Second)
	clock.Store(t0.UnixNano())
	svc := watcher.New(st, func() time.Time { return time.Unix(0, clock.Load()) }, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "a1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	e := expect.Expectation{ExpectationID: "e1", Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "1"}, Expects: "paid",
		SatisfiedBy: expect.SatisfiedBy{FactKey: "paid"}, DueAt: expect.FormatTime(t0.Add(time.Second)), Basis: "contract"}
	recs, err := svc.Raise(ctx, "a1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{e}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Store(t0.Add(2 * time.Second).UnixNano())
	if _, err := svc.TickDue(ctx, expect.Instants(recs[0])); err != nil {
		t.Fatal(err)
	}
	return svc, clock
}

// TestAttemptsOfOneRecordDoNotOverlap: a second Attempt of a record while
// the first is sending (on AWS: a duplicated stream record or timer
// message) sends nothing and asks for no retry; the first records the one
// attempt. Before, both sent, and a failure the slower one recorded after
// the other's success was dropped (TestAWSMode/DeliveryRetriesDeadLetterAndReplay
// saw two attempts recorded for three sends).
func TestAttemptsOfOneRecordDoNotOverlap(t *testing.T) {
	ctx := context.Background()
	svc, _ := lapsed(t)
	sender := &heldSender{release: make(chan struct{})}
	o := New(svc, sender, Options{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	first := make(chan bool)
	go func() {
		_, retry := o.Attempt(ctx, "a1", "e1")
		first <- retry
	}()
	for sender.sends.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if wait, retry := o.Attempt(ctx, "a1", "e1"); retry || wait != 0 {
		t.Fatalf("the overlapping attempt asked for a retry in %s", wait)
	}
	if n := sender.sends.Load(); n != 1 {
		t.Fatalf("%d sends while one attempt was under way", n)
	}
	close(sender.release)
	if <-first {
		t.Fatal("the delivered attempt asked for a retry")
	}
	rec, err := svc.Get(ctx, "a1", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Delivery.Attempts != 1 || rec.Delivery.DeliveredAt == "" || rec.LapseTaskID != "task-1" {
		t.Fatalf("delivery %+v, lapse task %q", rec.Delivery, rec.LapseTaskID)
	}
	// Afterwards the record may be attempted again (a replay): nothing is held.
	if len(o.attempting) != 0 {
		t.Fatalf("attempts still marked: %v", o.attempting)
	}
}

// scriptedSender fails or delivers as told, holding its first send until
// hold is closed.
type scriptedSender struct {
	sends atomic.Int64
	fail  atomic.Bool
	hold  chan struct{}
}

func (s *scriptedSender) Send(ctx context.Context, _ expect.Card, _ a2aout.Message) (string, error) {
	if s.sends.Add(1) == 1 {
		<-s.hold
	}
	if s.fail.Load() {
		return "", errors.New("agent unavailable")
	}
	return "task-1", nil
}

// sendHeld starts an attempt of e1 by o and returns once its send is
// under way (held by sender); the channel closes when the attempt ends.
func sendHeld(ctx context.Context, o *Outbox, sender *scriptedSender) chan struct{} {
	done := make(chan struct{})
	go func() {
		o.Attempt(ctx, "a1", "e1")
		close(done)
	}()
	for sender.sends.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	return done
}

// TestClaimedSendsAcrossProcesses: two outboxes on one store (two function
// instances on AWS) attempting one lapse at once send it once between
// them; the next attempt after a failure, and the first after a replay,
// are claimed afresh. Without ClaimSends each sent it.
func TestClaimedSendsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	svc, clock := lapsed(t)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	sender := &scriptedSender{hold: make(chan struct{})}
	sender.fail.Store(true)
	opt := Options{ClaimSends: true, MaxAttempts: 2}
	a, b := New(svc, sender, opt, log), New(svc, sender, opt, log)
	done := sendHeld(ctx, a, sender)
	if wait, retry := b.Attempt(ctx, "a1", "e1"); retry || wait != 0 {
		t.Fatalf("the other process's attempt asked for a retry in %s", wait)
	}
	close(sender.hold)
	<-done
	if n := sender.sends.Load(); n != 1 {
		t.Fatalf("%d sends by two processes at once, want 1", n)
	}
	rec, _ := svc.Get(ctx, "a1", "e1")
	if rec.Delivery.Attempts != 1 {
		t.Fatalf("delivery %+v, want one failed attempt", rec.Delivery)
	}
	// The next attempt (after its backoff) is the other process's to make.
	clock.Add(int64(time.Minute))
	b.Attempt(ctx, "a1", "e1")
	if rec, _ = svc.Get(ctx, "a1", "e1"); sender.sends.Load() != 2 || !rec.Delivery.DeadLettered {
		t.Fatalf("after the second attempt: %d sends, delivery %+v; want 2 and dead-lettered", sender.sends.Load(), rec.Delivery)
	}
	// Replayed at once (its first attempt's claim still held): sent.
	if _, err := svc.Redeliver(ctx, "a1", "e1"); err != nil {
		t.Fatal(err)
	}
	sender.fail.Store(false)
	a.Attempt(ctx, "a1", "e1")
	if rec, _ = svc.Get(ctx, "a1", "e1"); sender.sends.Load() != 3 || rec.Delivery.DeliveredAt == "" || rec.Delivery.Replays != 1 {
		t.Fatalf("after the replay: %d sends, delivery %+v; want 3, delivered, one replay", sender.sends.Load(), rec.Delivery)
	}
}

// TestRedeliverLeavesAnAttemptInFlight: a redeliver while the lapse is
// still being attempted changes nothing, so a second process does not
// start a send beside the one in flight (found by a review: the reset
// attempts named a fresh claim, and the task went out twice).
func TestRedeliverLeavesAnAttemptInFlight(t *testing.T) {
	ctx := context.Background()
	svc, _ := lapsed(t)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	sender := &scriptedSender{hold: make(chan struct{})}
	opt := Options{ClaimSends: true}
	a, b := New(svc, sender, opt, log), New(svc, sender, opt, log)
	done := sendHeld(ctx, a, sender)
	if rec, err := svc.Redeliver(ctx, "a1", "e1"); err != nil || rec.Delivery.Replays != 0 {
		t.Fatalf("redeliver of a lapse in flight: %+v, %v; want it unchanged", rec.Delivery, err)
	}
	b.Attempt(ctx, "a1", "e1")
	close(sender.hold)
	<-done
	if n := sender.sends.Load(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
}
