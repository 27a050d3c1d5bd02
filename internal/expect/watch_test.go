package expect

import (
	"testing"
	"time"
)

func TestWatched(t *testing.T) {
	watch := func(e *Expectation) {
		e.DueAt = FormatTime(at(time.Hour))
		e.WatchTask = &WatchTask{AgentID: "agent-2", TaskID: "t-9"}
	}
	r := raiseOne(t, exp("w", watch), nil, t0)
	now := at(time.Hour)
	cases := []struct {
		state   string
		at      time.Time
		want    State
		lapse   LapseKind
		factKey string
	}{
		{"completed", at(30 * time.Minute), StateSatisfied, "", "invoice.42.paid"},
		{"completed", at(2 * time.Hour), StateSatisfied, "", "invoice.42.paid"},       // a time ahead of now reads as now
		{"completed", t0.Add(-24 * time.Hour), StateSatisfied, "", "invoice.42.paid"}, // before the raise reads as the raise
		{"failed", time.Time{}, StateLapsed, Refuted, "a2a.task.failed"},
		{"rejected", at(time.Minute), StateLapsed, Refuted, "a2a.task.rejected"},
		{"canceled", at(time.Minute), StateLapsed, Refuted, "a2a.task.canceled"},
		{"working", at(time.Minute), StateOpen, "", ""},
		{"input-required", at(time.Minute), StateOpen, "", ""},
	}
	for _, c := range cases {
		out, changed, eff := Watched(r, RemoteTask{State: c.state, At: c.at}, "a2a-task:agent-2/t-9", nil, now)
		if out.State != c.want || changed != (c.want != StateOpen) {
			t.Errorf("%s: state %s changed %v", c.state, out.State, changed)
			continue
		}
		switch c.want {
		case StateSatisfied:
			want := c.at
			if want.After(now) {
				want = now
			}
			if want.Before(t0) {
				want = t0
			}
			if eff == nil || out.SatisfiedBy.FactKey != c.factKey || out.ObservedAt != FormatTime(want) || out.SatisfiedBy.Source != "a2a-task:agent-2/t-9" || out.Late {
				t.Errorf("%s: %+v (fact %+v)", c.state, out, out.SatisfiedBy)
			}
		case StateLapsed:
			if out.Lapse.Lapse != c.lapse || out.Lapse.RefutedBy.FactKey != c.factKey {
				t.Errorf("%s: lapse %+v", c.state, out.Lapse)
			}
		}
	}
	// refutedBy names the refuting fact's key.
	rb := raiseOne(t, exp("w2", watch, func(e *Expectation) { e.RefutedBy = &RefutedBy{FactKey: "remote.failed"} }), nil, t0)
	if out, _, _ := Watched(rb, RemoteTask{State: "failed"}, "s", nil, now); out.Lapse.RefutedBy.FactKey != "remote.failed" {
		t.Fatalf("refuted by %+v", out.Lapse.RefutedBy)
	}
	// Not watching, or not open: nothing.
	plain := raiseOne(t, exp("p"), nil, t0)
	if _, changed, _ := Watched(plain, RemoteTask{State: "completed"}, "s", nil, now); changed {
		t.Fatal("an expectation watching no task changed")
	}
	if !WatchPending(r, Instant{Kind: InstantGrace}) || WatchPending(r, Instant{Kind: InstantHorizon}) || WatchPending(plain, Instant{Kind: InstantDue}) {
		t.Fatal("WatchPending")
	}
	for in, want := range map[string]string{"TASK_STATE_INPUT_REQUIRED": "input-required", "input-required": "input-required", "TASK_STATE_COMPLETED": "completed", "canceled": "canceled"} {
		if got := NormalizeTaskState(in); got != want {
			t.Errorf("NormalizeTaskState(%q) = %q", in, got)
		}
	}
}
