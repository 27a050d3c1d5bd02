package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
)

// TestHeartbeatLifecycle drives one heartbeat every 3 s with 1 s of grace
// through every signal and status on a simulated clock: new, up, late,
// down (overdue), recovered by a ping, started and late, failed
// (refuted), paused, resumed, deleted and put again without reusing a
// period id.
func TestHeartbeatLifecycle(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	const agent, name = "agent-1", "nightly-sync"
	spec := heartbeat.Spec{Kind: "payment", Every: "PT3S", Grace: "PT1S"}
	v, created, err := svc.PutHeartbeat(ctx, agent, name, spec)
	if err != nil || !created || v.Status != heartbeat.StatusNew || v.Subject != (expect.Subject{Type: "invoice", ID: name}) {
		t.Fatalf("put: %+v created %v, %v", v, created, err)
	}
	if _, created, err := svc.PutHeartbeat(ctx, agent, name, spec); err != nil || created {
		t.Fatalf("put again: created %v, %v", created, err)
	}
	status := func(want string) heartbeat.View {
		t.Helper()
		v, err := svc.GetHeartbeat(ctx, agent, name)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != want {
			t.Fatalf("status %s, want %s (%+v)", v.Status, want, v)
		}
		return v
	}
	ping := func(sig heartbeat.Signal) heartbeat.View {
		t.Helper()
		v, err := svc.PingHeartbeat(ctx, agent, name, "cron-host", sig)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	record := func(id string) *expect.Record {
		t.Helper()
		r, err := svc.Get(ctx, agent, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// tick runs the watcher's instants of the current period that have come.
	tick := func() {
		t.Helper()
		v, _ := svc.GetHeartbeat(ctx, agent, name)
		for range 3 {
			r := record(v.ExpectationID)
			in, ok := expect.NextInstant(r)
			if !ok || in.At.After(clock.now()) {
				return
			}
			if err := svc.Tick(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
	}

	v = ping(heartbeat.Success)
	if v.Status != heartbeat.StatusUp || v.ExpectationID != "hb:nightly-sync:1" || v.NextDueAt != expect.FormatTime(clock.now().Add(3*time.Second)) {
		t.Fatalf("after the first ping: %+v", v)
	}
	first := record("hb:nightly-sync:1")
	if first.Expectation.SatisfiedBy.FactKey != "hb:nightly-sync:1" || first.Expectation.Grace != "PT1S" || first.TaskID != "hb:nightly-sync" {
		t.Fatalf("period 1: %+v", first)
	}
	clock.add(3500 * time.Millisecond)
	tick()
	status(heartbeat.StatusLate)
	clock.add(time.Second)
	tick()
	status(heartbeat.StatusDown)
	if r := record("hb:nightly-sync:1"); r.Lapse == nil || r.Lapse.Lapse != expect.Overdue || !PendingDelivery(r) {
		t.Fatalf("period 1 did not lapse overdue: %+v", r)
	}
	// A ping after the lapse: a late fact on period 1 (recovered), period 2.
	v = ping(heartbeat.Success)
	if v.Status != heartbeat.StatusUp || v.ExpectationID != "hb:nightly-sync:2" {
		t.Fatalf("after the recovering ping: %+v", v)
	}
	if r := record("hb:nightly-sync:1"); r.SatisfiedBy == nil || !r.Late || r.SatisfiedBy.Source != "cron-host" {
		t.Fatalf("period 1 did not record the late ping: %+v", r)
	}
	// A run starts and does not finish within its grace.
	clock.add(time.Second)
	v = ping(heartbeat.Start)
	if v.Status != heartbeat.StatusStarted || v.ExpectationID != "hb:nightly-sync:3" || v.NextDueAt != expect.FormatTime(clock.now().Add(time.Second)) {
		t.Fatalf("after start: %+v", v)
	}
	if r := record("hb:nightly-sync:2"); r.State != expect.StateWithdrawn || r.WithdrawnReason != "superseded by hb:nightly-sync:3" {
		t.Fatalf("period 2 after start: %+v", r)
	}
	clock.add(1500 * time.Millisecond)
	tick()
	status(heartbeat.StatusDown)
	// A fail while down changes nothing; a ping brings it up; a fail
	// refutes the open period at once.
	ping(heartbeat.Fail)
	status(heartbeat.StatusDown)
	ping(heartbeat.Success)
	v = ping(heartbeat.Fail)
	if v.Status != heartbeat.StatusDown {
		t.Fatalf("after fail: %+v", v)
	}
	if r := record(v.ExpectationID); r.Lapse == nil || r.Lapse.Lapse != expect.Refuted || r.Lapse.RefutedBy.FactKey != v.ExpectationID+":fail" {
		t.Fatalf("the failed period: %+v", r)
	}
	// Pause withdraws the open period; resume raises one.
	ping(heartbeat.Success)
	open := status(heartbeat.StatusUp).ExpectationID
	if v, err = svc.PauseHeartbeat(ctx, agent, name); err != nil || v.Status != heartbeat.StatusPaused {
		t.Fatalf("pause: %+v %v", v, err)
	}
	if r := record(open); r.State != expect.StateWithdrawn {
		t.Fatalf("pause left %s %s", open, r.State)
	}
	if v, err = svc.ResumeHeartbeat(ctx, agent, name); err != nil || v.Status != heartbeat.StatusUp || v.ExpectationID == open {
		t.Fatalf("resume: %+v %v", v, err)
	}
	// Deleted, then put again: new, and its next period does not reuse an id.
	last := status(heartbeat.StatusUp)
	if err := svc.DeleteHeartbeat(ctx, agent, name); err != nil {
		t.Fatal(err)
	}
	if r := record(last.ExpectationID); r.State != expect.StateWithdrawn {
		t.Fatalf("delete left %s %s", last.ExpectationID, r.State)
	}
	if _, err := svc.GetHeartbeat(ctx, agent, name); !errs.Is(err, errs.NotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := svc.PingHeartbeat(ctx, agent, name, "x", heartbeat.Success); !errs.Is(err, errs.NotFound) {
		t.Fatalf("ping after delete: %v", err)
	}
	if v, created, err = svc.PutHeartbeat(ctx, agent, name, spec); err != nil || !created || v.Status != heartbeat.StatusNew {
		t.Fatalf("put after delete: %+v %v %v", v, created, err)
	}
	if v = ping(heartbeat.Success); v.Period != last.Period+1 {
		t.Fatalf("the period after a re-put is %d, want %d", v.Period, last.Period+1)
	}
	list, _, err := svc.ListHeartbeats(ctx, agent, 0, "")
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Fatalf("list: %+v %v", list, err)
	}
	// Agents cannot raise a heartbeat's ids themselves.
	_, err = svc.Raise(ctx, agent, expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		paymentExpectation("hb:nightly-sync:99", clock.now().Add(time.Hour), nil)}})
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("raising a heartbeat id: %v", err)
	}
}

// TestHeartbeatUntilAndCron: a cron heartbeat's next period is due at the
// schedule's next instant, and none is raised after until.
func TestHeartbeatUntilAndCron(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	next, _ := heartbeat.ParseCron("*/5 * * * *", "Europe/Riga")
	until := clock.now().Add(next.Next(clock.now()).Sub(clock.now()) + time.Minute)
	_, _, err := svc.PutHeartbeat(ctx, "agent-1", "every-five", heartbeat.Spec{Kind: "payment", Cron: "*/5 * * * *", Timezone: "Europe/Riga", Until: expect.FormatTime(until)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := svc.PingHeartbeat(ctx, "agent-1", "every-five", "job", heartbeat.Success)
	if err != nil || v.NextDueAt != expect.FormatTime(next.Next(clock.now())) {
		t.Fatalf("first ping: %+v %v", v, err)
	}
	clock.add(next.Next(clock.now()).Sub(clock.now()))
	v, err = svc.PingHeartbeat(ctx, "agent-1", "every-five", "job", heartbeat.Success)
	if err != nil || v.Status != heartbeat.StatusUp || v.NextDueAt != "" || v.Period != 1 {
		t.Fatalf("a ping whose next instant is after until: %+v %v", v, err)
	}
	for _, bad := range []heartbeat.Spec{
		{Kind: "payment"},
		{Kind: "payment", Every: "PT5M", Cron: "* * * * *"},
		{Kind: "payment", Every: "PT0.5S"},
		{Kind: "payment", Cron: "0 9 * * *", Timezone: "Nowhere/Else"},
		{Kind: "nope", Every: "PT5M"},
	} {
		if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "bad", bad); !errs.Is(err, errs.Invalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "no/slash", heartbeat.Spec{Kind: "payment", Every: "PT5M"}); !errs.Is(err, errs.Invalid) {
		t.Errorf("a bad name: %v", err)
	}
}

// TestCronHeartbeatAcrossDaylightSaving: on a simulated clock, a heartbeat
// on "30 2 * * *" in New York and one on "30 3 * * *" in Riga are pinged
// just before the spring change of each zone: the next period is due at
// the change itself (their 2:30 and 3:30 do not exist that night), and the
// one after at 2:30 and 3:30 local the next day.
func TestCronHeartbeatAcrossDaylightSaving(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		zone, cron, pingAt string
		want               []string
	}{
		{"America/New_York", "30 2 * * *", "2026-03-08T06:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"Europe/Riga", "30 3 * * *", "2026-03-29T00:30:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
	} {
		svc, clock, _ := newTestService(t, expect.DefaultConfig())
		at, _ := expect.ParseTime(c.pingAt)
		clock.t = at
		if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "backup", heartbeat.Spec{Kind: "payment", Cron: c.cron, Timezone: c.zone, Grace: "PT10M"}); err != nil {
			t.Fatal(err)
		}
		for i, want := range c.want {
			v, err := svc.PingHeartbeat(ctx, "agent-1", "backup", "cron", heartbeat.Success)
			if err != nil {
				t.Fatal(err)
			}
			if v.NextDueAt != want {
				t.Fatalf("%s: period %d is due at %s, want %s", c.zone, i+1, v.NextDueAt, want)
			}
			due, _ := expect.ParseTime(want)
			clock.t = due.Add(time.Minute) // the job runs and pings a minute after
		}
	}
}
