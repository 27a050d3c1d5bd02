package alert

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

func TestConditionHolds(t *testing.T) {
	due := "2026-12-06T10:00:00Z"
	open := &expect.Record{State: expect.StateOpen, DueAt: due}
	moved := &expect.Record{State: expect.StateOpen, DueAt: "2026-12-06T11:00:00Z"}
	satisfied := &expect.Record{State: expect.StateSatisfied, DueAt: due}
	lapsed := &expect.Record{State: expect.StateLapsed, DueAt: due, Lapse: &expect.Lapse{Lapse: expect.Overdue}}
	acked := lapsed.Clone()
	acked.Ack = &expect.Ack{By: "alice"}
	recovered := lapsed.Clone()
	recovered.SatisfiedBy = &expect.Fact{FactKey: "k"}
	n := &Notification{About: Subject{DueAt: due}}
	for _, c := range []struct {
		name string
		c    Condition
		rec  *expect.Record
		ok   bool
		why  string
	}{
		{"reminder, still open", StillOpen, open, true, ""},
		{"reminder, satisfied", StillOpen, satisfied, false, "satisfied already"},
		{"reminder, lapsed", StillOpen, lapsed, false, "lapsed already"},
		{"reminder, due time moved", StillOpen, moved, false, "due time moved"},
		{"reminder, gone", StillOpen, nil, false, "gone"},
		{"repeat, lapsed", StillUnresolved, lapsed, true, ""},
		{"repeat, acknowledged", StillUnresolved, acked, false, "acknowledged by alice"},
		{"repeat, recovered", StillUnresolved, recovered, false, "satisfied it since"},
		{"repeat, not lapsed", StillUnresolved, open, false, "not lapsed"},
	} {
		ok, why := c.c.Holds(c.rec, n)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %q, want %v %q", c.name, ok, why, c.ok, c.why)
		}
	}
}

// TestNextRepeat: a lapse's notification repeats every Every after each
// delivery, Max times, each with a new id (a new webhook-id) and the same
// dedup key, waiting for its time and conditional on the lapse lasting.
func TestNextRepeat(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	n := &Notification{ID: "ntf_1", AgentID: "a", ChannelID: "pd", DedupKey: "clockwork-x", Event: Event{Type: Lapsed},
		Repeats: &RepeatState{Every: "PT1H", Max: 2}, Attempts: 3, DeliveredAt: expect.FormatTime(now)}
	seen := map[string]bool{n.ID: true}
	for i := 1; i <= 2; i++ {
		next, ok := n.NextRepeat(now)
		if !ok {
			t.Fatalf("repeat %d not made", i)
		}
		if seen[next.ID] || next.DedupKey != n.DedupKey || next.Event.Data.Repeat != i || next.Condition != StillUnresolved ||
			next.NextAttempt != expect.FormatTime(now.Add(time.Hour)) || !next.Pending() || next.Attempts != 0 {
			t.Fatalf("repeat %d: %+v", i, next)
		}
		seen[next.ID] = true
		n = next
		n.Delivered(now)
	}
	if _, ok := n.NextRepeat(now); ok {
		t.Fatal("a repeat past max")
	}
}

func TestParseRulesFollowUps(t *testing.T) {
	usable := func(id string) bool { return id == "slack" || id == "pd" }
	for _, c := range []struct {
		body  string
		field string // "" = valid
	}{
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"repeat":{"every":"PT1H","max":24},"escalate":[{"after":"PT30M","channels":["pd"]}]}]}`, ""},
		{`{"rules":[{"on":["expectation.due_soon"],"channels":["slack"],"before":"PT30M"}]}`, ""},
		{`{"rules":[{"on":["expectation.due_soon"],"channels":["slack"]}]}`, "rules[0].before"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"before":"PT30M"}]}`, "rules[0].before"},
		{`{"rules":[{"on":["expectation.due_soon"],"channels":["slack"],"before":"P1Y"}]}`, "rules[0].before"},
		{`{"rules":[{"on":["delivery.dead"],"channels":["slack"],"repeat":{"every":"PT1H","max":2}}]}`, "rules[0].repeat"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"repeat":{"every":"PT0S","max":2}}]}`, "rules[0].repeat.every"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"repeat":{"every":"PT1H","max":0}}]}`, "rules[0].repeat.max"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"repeat":{"every":"PT1H","max":101}}]}`, "rules[0].repeat.max"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"escalate":[{"after":"PT30M","channels":["nope"]}]}]}`, "rules[0].escalate[0].channels[0]"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"escalate":[{"after":"PT30M","channels":[]}]}]}`, "rules[0].escalate[0].channels"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"escalate":[{"after":"soon","channels":["pd"]}]}]}`, "rules[0].escalate[0].after"},
		{`{"rules":[{"on":["verification.failed"],"channels":["slack"],"escalate":[{"after":"PT1M","channels":["pd"]}]}]}`, "rules[0].escalate"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"escalate":[{"after":"PT1M","channels":["pd","pd"]}]}]}`, "rules[0].escalate[0].channels[1]"},
		// Durations whose parts would wrap past the bound when added.
		{`{"rules":[{"on":["expectation.due_soon"],"channels":["slack"],"before":"P213504D"}]}`, "rules[0].before"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"escalate":[{"after":"P213504D","channels":["pd"]}]}]}`, "rules[0].escalate[0].after"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["slack"],"cooldown":"P30501W"}]}`, "rules[0].cooldown"},
	} {
		_, err := ParseRules("a", []byte(c.body), usable)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || !hasField(e, c.field) {
			t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.field)
		}
	}
}

func hasField(e *errs.Error, path string) bool {
	for _, f := range e.Fields {
		if f.Path == path {
			return true
		}
	}
	return false
}
