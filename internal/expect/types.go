// Package expect is the domain of the A2A Expectations extension
// (https://rsaxb.com/a2a/expectations/v1): expectations, facts, lapses, the
// watcher's records, the kind declaration on an agent card, validation, and
// the watcher's state machine as pure functions. It does no I/O: callers load
// records, call these functions with the watcher's clock, and persist what
// they return.
package expect

import (
	"encoding/json"
	"time"
)

// URI is the extension's URI: the activation header value, the metadata key
// and the agent card's capabilities.extensions[].uri.
const URI = "https://rsaxb.com/a2a/expectations/v1"

// Subject is what an expectation is about. Its id is opaque.
type Subject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// SatisfiedBy names the fact key that satisfies an expectation.
type SatisfiedBy struct {
	FactKey string `json:"factKey"`
	// Lookback (an extension field, ISO 8601 duration) lets a fact with
	// the key that the watcher accepted within that window before the
	// raise satisfy the expectation when it is raised.
	Lookback string `json:"lookback,omitempty"`
}

// RefutedBy (an extension field beside the seed's) names the fact key
// that ends an open expectation at once with lapse "refuted": the thing
// expected is known not to happen ("the payment was declined").
type RefutedBy struct {
	FactKey string `json:"factKey"`
	// Lookback is as SatisfiedBy.Lookback, for a refuting fact.
	Lookback string `json:"lookback,omitempty"`
}

// WatchTask (an extension field) names a task of a registered A2A agent
// that the expectation waits on: the watcher asks that agent for the
// task at the expectation's due and grace instants, and the task
// completed satisfies it, failed, rejected or canceled refutes it.
type WatchTask struct {
	AgentID string `json:"agentId"`
	TaskID  string `json:"taskId"`
}

// Anchor makes an expectation's current due time follow another
// expectation's satisfaction: anchor.observedAt + Offset.
type Anchor struct {
	ExpectationID string `json:"expectationId"`
	Offset        string `json:"offset"`
}

// Expectation is what an agent declares it expects for a subject and by
// when. It is immutable once raised.
type Expectation struct {
	ExpectationID string      `json:"expectationId"`
	Kind          string      `json:"kind"`
	Subject       Subject     `json:"subject"`
	Expects       string      `json:"expects"`
	SatisfiedBy   SatisfiedBy `json:"satisfiedBy"`
	RefutedBy     *RefutedBy  `json:"refutedBy,omitempty"`
	WatchTask     *WatchTask  `json:"watchTask,omitempty"`
	DueAt         string      `json:"dueAt"`
	Grace         string      `json:"grace,omitempty"`
	Anchor        *Anchor     `json:"anchor,omitempty"`
	After         []string    `json:"after,omitempty"`
	Horizon       string      `json:"horizon,omitempty"`
	Basis         string      `json:"basis"`
	Supersedes    string      `json:"supersedes,omitempty"`
}

// Fact is an observation reported by an agent. Source is always set by the
// watcher to the authenticated reporter (so it is optional on input, and
// present on every stored fact).
type Fact struct {
	FactKey    string   `json:"factKey"`
	ObservedAt string   `json:"observedAt"`
	Source     string   `json:"source,omitempty"`
	Subject    *Subject `json:"subject,omitempty"`
}

// LapseKind says why an expectation lapsed.
type LapseKind string

// The lapse kinds of the extension.
const (
	Overdue LapseKind = "overdue"
	Skipped LapseKind = "skipped"
	Stalled LapseKind = "stalled"
	// Refuted (an extension value) is a lapse decided by a fact that
	// matched the expectation's refutedBy. The seed has agents treat an
	// unknown value as "overdue", so older agents still act on it.
	Refuted LapseKind = "refuted"
)

// LapseKinds lists every lapse kind, in the order they are documented.
var LapseKinds = []LapseKind{Overdue, Skipped, Stalled, Refuted}

// Ack is a person's acknowledgement of a lapse.
type Ack struct {
	// By is the principal that acknowledged it.
	By string `json:"by"`
	At string `json:"at"`
	// Note is the acknowledger's optional comment.
	Note string `json:"note,omitempty"`
}

// MaxAckNoteLen bounds an acknowledgement's note (characters).
const MaxAckNoteLen = 1000

// Lapse is carried in the lapse task's message metadata.
type Lapse struct {
	ExpectationID  string    `json:"expectationId"`
	Kind           string    `json:"kind"`
	Subject        Subject   `json:"subject"`
	Expects        string    `json:"expects"`
	Lapse          LapseKind `json:"lapse"`
	ProjectedDueAt string    `json:"projectedDueAt"`
	DueAt          string    `json:"dueAt"`
	LapsedAt       string    `json:"lapsedAt"`
	LastFactAt     string    `json:"lastFactAt,omitempty"`
	SatisfiedAfter []string  `json:"satisfiedAfter,omitempty"`
	// RefutedBy is the fact that refuted the expectation (lapse
	// "refuted"; an extension field).
	RefutedBy *Fact `json:"refutedBy,omitempty"`
	Lineage   int   `json:"lineage"`
}

// State is an expectation record's state.
type State string

// Record states. Only StateOpen can change.
const (
	StateOpen      State = "open"
	StateSatisfied State = "satisfied"
	StateLapsed    State = "lapsed"
	StateWithdrawn State = "withdrawn"
)

// Delivery tracks the outbox delivery of a lapse task.
type Delivery struct {
	MessageID string `json:"messageId"`
	// Attempts counts the sends made (a wait for the agent's circuit is
	// not one).
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// LastErrorClass is the class of the last failure (retry.Class:
	// "unreachable", "timeout", "throttled", "server-error", "rejected",
	// "unauthorized", "refused", "misconfigured", "unknown").
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// FailingSince is when the first failure (or wait) of this run of
	// attempts was: the retry window runs from it.
	FailingSince string `json:"failingSince,omitempty"`
	// WaitingForProbe is set while the next attempt waits for the probe
	// of the agent's circuit (the agent is down; one message at a time
	// tries it).
	WaitingForProbe bool `json:"waitingForProbe,omitempty"`
	DeadLettered    bool `json:"deadLettered,omitempty"`
	// Suppressed is true when the agent keeps its own time and the watcher
	// is configured not to send it lapse tasks.
	Suppressed bool `json:"suppressed,omitempty"`
	// SilencedBy names the silence (with lapseTasks) that suppressed it.
	SilencedBy  string `json:"silencedBy,omitempty"`
	DeliveredAt string `json:"deliveredAt,omitempty"`
	// NextAttemptAt is when a failed delivery may be tried again.
	NextAttemptAt string `json:"nextAttemptAt,omitempty"`
	// Activated is set when the lapse task was delivered: whether the
	// agent echoed the extension URI in its A2A-Extensions response header
	// (the extension's activation rule), so operators can see agents that
	// ignore the extension.
	Activated *bool `json:"activated,omitempty"`
	// Replays counts the times an operator put the lapse back for
	// delivery (Redeliver) after it was dead-lettered or suppressed.
	Replays int `json:"replays,omitempty"`
}

// Record is the watcher's record of one expectation: the spec's
// ExpectationRecord plus the origin task, raise time and lineage.
type Record struct {
	AgentID        string      `json:"agentId"`
	TaskID         string      `json:"taskId"`
	ContextID      string      `json:"contextId"`
	Skill          string      `json:"skill,omitempty"`
	Expectation    Expectation `json:"expectation"`
	ProjectedDueAt string      `json:"projectedDueAt"`
	DueAt          string      `json:"dueAt"`
	State          State       `json:"state"`
	PastDue        bool        `json:"pastDue,omitempty"`
	SatisfiedAt    string      `json:"satisfiedAt,omitempty"`
	ObservedAt     string      `json:"observedAt,omitempty"`
	Late           bool        `json:"late,omitempty"`
	SatisfiedBy    *Fact       `json:"satisfiedBy,omitempty"`
	Lapse          *Lapse      `json:"lapse,omitempty"`
	LapseTaskID    string      `json:"lapseTaskId,omitempty"`
	// Ack is who acknowledged the lapse, when, and why (on-call: it stops
	// the lapse's repeats and escalation).
	Ack             *Ack   `json:"ack,omitempty"`
	WithdrawnReason string `json:"withdrawnReason,omitempty"`
	WithdrawnAt     string `json:"withdrawnAt,omitempty"`
	// HorizonChecked is set once the horizon has passed with facts on the
	// subject, so the horizon instant is not scheduled again.
	HorizonChecked bool      `json:"horizonChecked,omitempty"`
	RaisedAt       string    `json:"raisedAt"`
	Lineage        int       `json:"lineage"`
	Delivery       *Delivery `json:"delivery,omitempty"`
	// ExpiresAt is when the record, final, will be deleted
	// (-retain-expectations after it became final; StampExpiry).
	ExpiresAt string `json:"expiresAt,omitempty"`
	// Version is the store version the record was read at (not serialised).
	Version int64 `json:"-"`
}

// SubjectRecord is the watcher's per-subject memory: when a fact on it was
// last observed (max observedAt) and last reported (watcher clock).
type SubjectRecord struct {
	AgentID        string  `json:"agentId"`
	Subject        Subject `json:"subject"`
	LastFactAt     string  `json:"lastFactAt,omitempty"`
	LastReportedAt string  `json:"lastReportedAt,omitempty"`
	Version        int64   `json:"-"`
}

// Kind is one ExpectationKind declared on an agent card.
type Kind struct {
	Kind        string   `json:"kind"`
	SubjectType string   `json:"subjectType"`
	Describes   string   `json:"describes"`
	Basis       string   `json:"basis"`
	Skills      []string `json:"skills,omitempty"`
}

// Declaration is the extension's params on an agent card.
type Declaration struct {
	KeepsTime  bool   `json:"keepsTime"`
	LapseSkill string `json:"lapseSkill"`
	Kinds      []Kind `json:"kinds"`
	// Heartbeats and Lookback (extension params beside the seed's) say
	// that the agent uses heartbeats and satisfiedBy.lookback.
	Heartbeats bool `json:"heartbeats,omitempty"`
	Lookback   bool `json:"lookback,omitempty"`
}

// Card is what the watcher needs from an agent's A2A card, together with the
// card as it was submitted.
type Card struct {
	AgentID string
	// Raw is the A2A agent card as submitted.
	Raw json.RawMessage
	// Declaration is the extension declaration read from
	// capabilities.extensions[].
	Declaration Declaration
	// Skills are the ids of the card's skills.
	Skills []string
	// ProtocolVersion is "1.0" or "0.3"; URL the JSON-RPC endpoint.
	ProtocolVersion string
	URL             string
	// SecuritySchemes are the card's securitySchemes by name, and Security
	// its security requirements (alternatives, in the card's order); both
	// empty when the agent accepts unauthenticated requests.
	SecuritySchemes map[string]SecurityScheme
	Security        []SecurityRequirement
}

// InstantKind names one of an open expectation's instants.
type InstantKind string

// The instants of an open expectation.
const (
	InstantDue     InstantKind = "due"
	InstantGrace   InstantKind = "grace"
	InstantHorizon InstantKind = "horizon"
	// InstantDeliver is not an instant of the record's state but the time
	// a failed lapse delivery may be tried again (the AWS runtime asks the
	// Scheduler for it rather than wait in the stream consumer).
	InstantDeliver InstantKind = "deliver"
	// InstantNotify is the time an alert notification (internal/notify)
	// is to be attempted; ExpectationID then holds the notification's id.
	InstantNotify InstantKind = "notify"
)

// Instant is one point in time at which the watcher must look at a record.
type Instant struct {
	AgentID       string      `json:"agentId"`
	ExpectationID string      `json:"expectationId"`
	Kind          InstantKind `json:"kind"`
	At            time.Time   `json:"at"`
}
