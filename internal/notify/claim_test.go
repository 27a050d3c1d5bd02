package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// heldBus is an EventPutter that holds its first put until hold is closed
// and fails while fail is set.
type heldBus struct {
	puts atomic.Int64
	fail atomic.Bool
	hold chan struct{}
}

func (b *heldBus) PutEvent(ctx context.Context, bus, detailType string, detail []byte, at time.Time) error {
	if b.puts.Add(1) == 1 {
		<-b.hold
	}
	if b.fail.Load() {
		return errors.New("throttled")
	}
	return nil
}

// TestClaimedSendsAcrossProcesses: two services on one store (two function
// instances on AWS) attempting one notification at once send it once
// between them; the next attempt after a failure, and the first after a
// replay, are claimed afresh. Without ClaimSends each sent it.
func TestClaimedSendsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "n.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var clock atomic.Int64
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clock.Store(t0.UnixNano())
	bus := &heldBus{hold: make(chan struct{})}
	bus.fail.Store(true)
	opt := Options{ClaimSends: true, MaxAttempts: 2, Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a := New(st, nil, nil, nil, bus, opt, log)
	b := New(st, nil, nil, nil, bus, opt, log)
	agents := []string{"a1"}
	if _, _, err := a.PutChannel(ctx, agents, "ops", []byte(`{"type":"eventbridge","eventBusName":"ops"}`)); err != nil {
		t.Fatal(err)
	}
	c, err := a.channel(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(expect.Record{AgentID: "a1", Expectation: expect.Expectation{ExpectationID: "e1"}})
	n := &alert.Notification{ID: "n1", AgentID: "a1", ChannelID: "ops", ChannelIncarnation: c.Incarnation, DedupKey: "d1",
		Event:     alert.Event{Type: alert.Lapsed, Timestamp: expect.FormatTime(t0), Data: alert.EventData{AgentID: "a1", Record: rec}},
		CreatedAt: expect.FormatTime(t0)}
	it, err := notificationItem(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, []store.Write{store.PutIfAbsent(it)}); err != nil {
		t.Fatal(err)
	}
	read := func() *alert.Notification {
		t.Helper()
		it, err := st.Get(ctx, notificationKey("a1", "n1"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := decodeNotification(it)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	done := make(chan struct{})
	go func() {
		a.Attempt(ctx, "a1", "n1")
		close(done)
	}()
	for bus.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if wait, retry := b.Attempt(ctx, "a1", "n1"); retry || wait != 0 {
		t.Fatalf("the other process's attempt asked for a retry in %s", wait)
	}
	close(bus.hold)
	<-done
	if got := bus.puts.Load(); got != 1 || read().Attempts != 1 {
		t.Fatalf("%d sends by two processes at once, %d attempts recorded; want 1 and 1", got, read().Attempts)
	}
	// The next attempt (after its backoff) is the other process's to make.
	clock.Add(int64(time.Minute))
	b.Attempt(ctx, "a1", "n1")
	if got := read(); bus.puts.Load() != 2 || !got.Dead {
		t.Fatalf("after the second attempt: %d sends, %+v; want 2 and dead-lettered", bus.puts.Load(), got)
	}
	// Replayed at once (its first attempt's claim still held): sent.
	if _, err := a.Replay(ctx, agents, "ops", "a1", "n1"); err != nil {
		t.Fatal(err)
	}
	bus.fail.Store(false)
	a.Attempt(ctx, "a1", "n1")
	if got := read(); bus.puts.Load() != 3 || got.DeliveredAt == "" {
		t.Fatalf("after the replay: %d sends, %+v; want 3 and delivered", bus.puts.Load(), got)
	}
}
