package alert

import (
	"fmt"
	"strconv"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// On-call follow-ups of an event: a reminder before an expectation is due
// (expectation.due_soon, a rule's Before), the lapse's notification sent
// again while nobody reacts (a rule's Repeat), and further channels told
// when nobody reacts (a rule's Escalate). Each is a notification made when
// its event is, waiting until its time (NextAttempt) with a Condition that
// must still hold then; the delivery path skips it otherwise.

// Condition is what must hold of a notification's expectation when its
// time comes.
type Condition string

// The conditions.
const (
	// StillOpen: the expectation is open, with the due time the reminder
	// was made for (a re-anchored one gets a reminder of its own).
	StillOpen Condition = "open"
	// StillUnresolved: the expectation is still lapsed, neither satisfied
	// since nor acknowledged.
	StillUnresolved Condition = "unresolved"
)

// Holds reports whether c holds of rec (nil: the expectation is gone) for
// n, and when it does not, why, as a sentence for the notification's
// Skipped.
func (c Condition) Holds(rec *expect.Record, n *Notification) (bool, string) {
	if rec == nil {
		return false, "the expectation is gone"
	}
	switch c {
	case StillOpen:
		switch {
		case rec.State != expect.StateOpen:
			return false, "the expectation is " + string(rec.State) + " already"
		case rec.DueAt != n.About.DueAt:
			return false, "its due time moved to " + rec.DueAt
		}
	case StillUnresolved:
		switch {
		case rec.Lapse == nil:
			return false, "the expectation has not lapsed"
		case rec.Ack != nil:
			return false, "acknowledged by " + rec.Ack.By
		case rec.SatisfiedBy != nil:
			return false, "a fact satisfied it since it lapsed"
		}
	}
	return true, ""
}

// Skip records at now that n is not sent, and why.
func (n *Notification) Skip(now time.Time, why string) {
	n.Skipped, n.SkippedAt, n.NextAttempt, n.WaitingForProbe = why, expect.FormatTime(now), "", false
}

// RepeatState is how a lapse's notification is sent again: every Every
// after the last one was delivered, N times so far, at most Max.
type RepeatState struct {
	Every string `json:"every"`
	N     int    `json:"n"`
	Max   int    `json:"max"`
}

// NextRepeat returns the notification that sends n again once n was
// delivered at now (a new id, so a new webhook-id; the same dedup key, so
// the same PagerDuty incident), and false when n repeats no more.
func (n *Notification) NextRepeat(now time.Time) (*Notification, bool) {
	r := n.Repeats
	if r == nil || r.N >= r.Max {
		return nil, false
	}
	every, err := parseSpan(r.Every, minRepeat, MaxCooldown)
	if err != nil {
		return nil, false
	}
	next := *n
	next.ID = NotificationID(n.ID+"\x00repeat", strconv.Itoa(r.N+1), n.ChannelID)
	next.Repeats = &RepeatState{Every: r.Every, N: r.N + 1, Max: r.Max}
	next.Condition = StillUnresolved
	next.Event.Data.Repeat = r.N + 1
	next.Event.Timestamp = expect.FormatTime(now.Add(every))
	next.CreatedAt = expect.FormatTime(now)
	next.NextAttempt = next.Event.Timestamp
	next.Attempts, next.LastError, next.LastErrorClass, next.FailingSince = 0, "", "", ""
	next.WaitingForProbe, next.DeliveredAt, next.Dead, next.DeadAt, next.Replays = false, "", false, "", 0
	next.Skipped, next.SkippedAt = "", ""
	return &next, true
}

// EveryOf returns r's period.
func (r Repeat) EveryOf() time.Duration {
	d, _ := parseSpan(r.Every, minRepeat, MaxCooldown)
	return d
}

// Bounds of the follow-ups.
const (
	minRepeat = time.Second
	// MaxRepeats bounds a rule's repeat.max.
	MaxRepeats = 100
	// MaxEscalationSteps bounds a rule's escalate list.
	MaxEscalationSteps = 5
	// MaxBefore bounds a reminder's before.
	MaxBefore = 30 * 24 * time.Hour
)

// parseSpan parses an ISO 8601 duration in weeks, days, hours, minutes or
// seconds within [lo, hi].
func parseSpan(s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := expect.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d.Years != 0 || d.Months != 0 {
		return 0, fmt.Errorf("must be in weeks, days, hours, minutes or seconds")
	}
	// Each part within the bound first, so that their sum cannot wrap.
	if d.Weeks > int(hi/(7*24*time.Hour)) || d.Days > int(hi/(24*time.Hour)) || d.Clock > hi {
		return 0, fmt.Errorf("must be from %v to %v", lo, hi)
	}
	total := time.Duration(d.Weeks)*7*24*time.Hour + time.Duration(d.Days)*24*time.Hour + d.Clock
	if total < lo || total > hi {
		return 0, fmt.Errorf("must be from %v to %v", lo, hi)
	}
	return total, nil
}
