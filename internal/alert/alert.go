// Package alert is the domain of alert channels: the channels operators
// configure (webhook, Slack, PagerDuty, email, EventBridge), the rules an
// agent attaches to them, the events that reach them (a lapse, a recovery,
// a dead lapse task, a failed VERIFY), and the notification record that
// carries one event to one channel at least once. It has no I/O: the
// service in internal/notify loads, decides here, commits and sends.
package alert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/retry"
)

// EventType names what happened.
type EventType string

// The event types rules may name.
const (
	// Lapsed: an expectation lapsed (overdue, skipped or stalled).
	Lapsed EventType = "expectation.lapsed"
	// Recovered: a fact satisfied an expectation after it lapsed.
	Recovered EventType = "expectation.recovered"
	// Acknowledged: a person acknowledged a lapse. It goes to the
	// channels of every rule that sends the lapse (a PagerDuty incident
	// is acknowledged), as well as to rules that name it.
	Acknowledged EventType = "expectation.acknowledged"
	// DueSoon: an open expectation is due within the rule's Before (a
	// reminder, sent at dueAt - before).
	DueSoon EventType = "expectation.due_soon"
	// DeliveryDead: the lapse task to the agent was dead-lettered.
	DeliveryDead EventType = "delivery.dead"
	// VerificationFailed: a VERIFY's verdict is FAIL.
	VerificationFailed EventType = "verification.failed"
	// VerificationCompleted: a VERIFY's verdict became final (PASS or
	// FAIL): its scores, for the tools teams read them in (an otlp
	// channel sends them as gen_ai.evaluation.result events).
	VerificationCompleted EventType = "verification.completed"
	// ChannelTest is sent by POST /v1/channels/{id}/test only; rules
	// cannot name it.
	ChannelTest EventType = "channel.test"
)

// RuleEvents are the event types a rule may name.
var RuleEvents = []EventType{Lapsed, Recovered, Acknowledged, DueSoon, DeliveryDead, VerificationFailed, VerificationCompleted, PassRateBelow}

// Event is one notification's body (the webhook body, EventBridge's
// Detail): what happened, when, and the record it happened to.
type Event struct {
	Type      EventType `json:"type"`
	Timestamp string    `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData names the agent and carries the record: the expectation record
// for expectation and delivery events, the VERIFY for verification events.
type EventData struct {
	AgentID string `json:"agentId"`
	// Record is the expectation record (expect.Record) as stored.
	Record json.RawMessage `json:"record,omitempty"`
	// Reason is why the lapse task was dead-lettered (delivery.dead).
	Reason         string          `json:"reason,omitempty"`
	AnticipationID string          `json:"anticipationId,omitempty"`
	PlanID         string          `json:"planId,omitempty"`
	Verification   json.RawMessage `json:"verification,omitempty"`
	// FailedCriteria lists the criteria of a failed VERIFY that did not
	// pass (verification.failed, verification.completed).
	FailedCriteria []string `json:"failedCriteria,omitempty"`
	// Verdict is a final VERIFY's verdict (verification.completed).
	Verdict string `json:"verdict,omitempty"`
	// PassRate is the share of the VERIFYs counted over Window that
	// passed (of CriterionID's grades when set), Plans how many were
	// counted, Threshold the rule's (evaluation.pass_rate_below and
	// evaluation.pass_rate_recovered).
	PassRate    *float64 `json:"passRate,omitempty"`
	Plans       int      `json:"plans,omitempty"`
	Threshold   float64  `json:"threshold,omitempty"`
	Window      string   `json:"window,omitempty"`
	CriterionID string   `json:"criterionId,omitempty"`
	// ChannelID is the channel a channel.test was sent to.
	ChannelID string `json:"channelId,omitempty"`
	// HeldBack is how many events of the same rule a cooldown held back
	// since the last one sent.
	HeldBack int `json:"heldBack,omitempty"`
	// AcknowledgedBy and Note say who acknowledged a lapse and why
	// (expectation.acknowledged).
	AcknowledgedBy string `json:"acknowledgedBy,omitempty"`
	Note           string `json:"note,omitempty"`
	// Repeat numbers a lapse's notification sent again (1, 2, ...: the
	// rule's repeat), Escalation the step of the rule's escalation that
	// sent it (1, 2, ...); zero on the first notification.
	Repeat     int `json:"repeat,omitempty"`
	Escalation int `json:"escalation,omitempty"`
}

// Subject is what an event is about, for summaries and filters: the
// expectation's kind, subject, due time and lapse, when it is one.
type Subject struct {
	ExpectationID string
	Kind          string
	SubjectType   string
	SubjectID     string
	Expects       string
	DueAt         string
	Lapse         string
	// LapsedAt is when it lapsed (escalation steps count from it).
	LapsedAt string
}

// Occurrence is an event as the feed found it, before rules choose its
// channels: the event, what it is about, and a key that is the same each
// time the same occurrence is found again (a replayed change), so its
// notifications are created once.
type Occurrence struct {
	Event   Event
	About   Subject
	Key     string
	Verdict string
	// Incident, when set, names the incident the occurrence belongs to
	// (its PagerDuty dedup_key), where the expectation or VERIFY does not.
	Incident string `json:",omitempty"`
}

// NotificationID is the id of the notification of occurrence key to
// channel under rule: the same for every replay of the occurrence, so a
// notification is created once (and is the webhook-id of every attempt).
func NotificationID(key, rule, channel string) string {
	h := sha256.Sum256([]byte(key + "\x00" + rule + "\x00" + channel))
	return "ntf_" + hex.EncodeToString(h[:12])
}

// Notification is one event on its way to one channel: the outbox entry of
// a notification. It is delivered at least once; every attempt carries its
// ID (the webhook-id, PagerDuty's dedup_key is the occurrence's).
type Notification struct {
	ID          string `json:"id"`
	AgentID     string `json:"agentId"`
	ChannelID   string `json:"channelId"`
	ChannelType Type   `json:"channelType"`
	// ChannelIncarnation is the incarnation of the channel the notification
	// was made for; a channel deleted and created again does not send it.
	ChannelIncarnation string  `json:"channelIncarnation,omitempty"`
	Event              Event   `json:"event"`
	About              Subject `json:"about"`
	DedupKey           string  `json:"dedupKey"`
	CreatedAt          string  `json:"createdAt"`
	Attempts           int     `json:"attempts,omitempty"`
	LastError          string  `json:"lastError,omitempty"`
	// LastErrorClass is the class of the last failure (retry.Class).
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// FailingSince is when this run of failures (or waits) began: the
	// retry window runs from it.
	FailingSince string `json:"failingSince,omitempty"`
	// WaitingForProbe is set while the next attempt waits for the probe of
	// the channel's circuit.
	WaitingForProbe bool   `json:"waitingForProbe,omitempty"`
	NextAttempt     string `json:"nextAttemptAt,omitempty"`
	DeliveredAt     string `json:"deliveredAt,omitempty"`
	Dead            bool   `json:"deadLettered,omitempty"`
	DeadAt          string `json:"deadLetteredAt,omitempty"`
	Replays         int    `json:"replays,omitempty"`
	// Condition, on a notification sent later than its event (a reminder,
	// a repeat, an escalation), is what must still hold of the
	// expectation when its time comes (Holds); otherwise it is skipped.
	Condition Condition `json:"condition,omitempty"`
	// Skipped says why a conditional notification was not sent, and
	// SkippedAt when that was decided.
	Skipped   string `json:"skipped,omitempty"`
	SkippedAt string `json:"skippedAt,omitempty"`
	// Silenced is the silence that held it back (with Skipped).
	Silenced string `json:"silenced,omitempty"`
	// ByOperator carries its rules' alert.Rules.ByOperator: the channel
	// must still serve them when it is sent (Channel.Serves).
	ByOperator bool `json:"byOperator,omitempty"`
	// Repeats, on a lapse's notification of a rule with a repeat, is what
	// sends it again once it is delivered.
	Repeats *RepeatState `json:"repeats,omitempty"`
}

// Pending reports whether n still waits for delivery.
func (n *Notification) Pending() bool { return n.DeliveredAt == "" && !n.Dead && n.Skipped == "" }

// Delivered records a successful attempt at now.
func (n *Notification) Delivered(now time.Time) {
	n.Attempts++
	n.DeliveredAt = expect.FormatTime(now)
	n.LastError, n.NextAttempt = "", ""
}

// Failed records a failed attempt at now that met f: the next attempt as
// policy decides, or the dead letter (a permanent failure, the attempt
// budget spent, the retry window closed).
func (n *Notification) Failed(now time.Time, reason string, f retry.Failure, policy retry.Policy) {
	n.Attempts++
	n.LastError = truncate(reason, 512)
	n.LastErrorClass = string(f.Class)
	n.WaitingForProbe = false
	since := n.failingSince(now)
	n.FailingSince = expect.FormatTime(since)
	d := policy.AfterFailure(n.ID, n.Attempts, since, now, f)
	if d.Dead {
		n.Dead, n.DeadAt, n.NextAttempt = true, expect.FormatTime(now), ""
		return
	}
	n.NextAttempt = expect.FormatTime(d.Next)
}

// WaitForProbe records at now that the next attempt waits for the
// channel's circuit until until (capped at the end of the retry window),
// without counting an attempt; when the window has closed it dead-letters
// n instead.
func (n *Notification) WaitForProbe(now, until time.Time, policy retry.Policy) {
	policy = policy.WithDefaults()
	since := n.failingSince(now)
	n.FailingSince = expect.FormatTime(since)
	if policy.Expired(since, now) {
		n.Dead, n.DeadAt, n.NextAttempt, n.WaitingForProbe = true, expect.FormatTime(now), "", false
		if n.LastError == "" {
			n.LastError = "the channel's receiver was down (its circuit open) for the whole retry window"
		}
		return
	}
	if end := since.Add(policy.For); until.After(end) {
		until = end
	}
	n.NextAttempt, n.WaitingForProbe = expect.FormatTime(until), true
}

func (n *Notification) failingSince(now time.Time) time.Time {
	if n.FailingSince != "" {
		if t, err := expect.ParseTime(n.FailingSince); err == nil {
			return t
		}
	}
	return now
}

// Replay puts a dead-lettered notification back for delivery at now, its
// attempts counted afresh. It reports false when n is not dead-lettered.
func (n *Notification) Replay(now time.Time) bool {
	if !n.Dead {
		return false
	}
	n.Dead, n.DeadAt, n.Attempts, n.LastError = false, "", 0, ""
	n.LastErrorClass, n.FailingSince, n.WaitingForProbe = "", "", false
	n.NextAttempt = expect.FormatTime(now)
	n.Replays++
	return true
}

// Wait is how long before n's next attempt is due at now (zero: now).
func (n *Notification) Wait(now time.Time) time.Duration {
	if n.NextAttempt == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, n.NextAttempt)
	if err != nil {
		return 0
	}
	return max(0, t.Sub(now))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ValidEvent reports whether t is an event type a rule may name.
func ValidEvent(t EventType) bool { return slices.Contains(RuleEvents, t) }
