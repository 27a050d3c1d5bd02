package expect

import (
	"strings"
	"time"
)

// RemoteTask is what a watched task's agent answered about it: its state
// in the A2A 1.0 spelling's lower-case suffix, as 0.3 spells it
// ("completed", "failed", "rejected", "canceled", "working", ...), and
// when that status was recorded (zero when the agent did not say).
type RemoteTask struct {
	State string
	At    time.Time
}

// NormalizeTaskState spells an A2A task state of either version the 0.3
// way: "TASK_STATE_INPUT_REQUIRED" and "input-required" are both
// "input-required".
func NormalizeTaskState(s string) string {
	s = strings.TrimPrefix(s, "TASK_STATE_")
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// WatchedAgents returns the agents whose tasks req watches, each once.
func (req RaiseRequest) WatchedAgents() []string {
	var out []string
	for _, e := range req.Expectations {
		if w := e.WatchTask; w != nil && w.AgentID != "" && !contains(out, w.AgentID) {
			out = append(out, w.AgentID)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// WatchPending reports whether the watched task of open record r is to be
// asked about before instant in is evaluated: its due and grace instants
// (a horizon is about the subject, not the task).
func WatchPending(r *Record, in Instant) bool {
	return r != nil && r.State == StateOpen && r.Expectation.WatchTask != nil && (in.Kind == InstantDue || in.Kind == InstantGrace)
}

// Watched applies what the watched task's agent answered to open record
// r at now: a completed task satisfies it, a failed, rejected or canceled
// one refutes it (lapse "refuted"), each with a fact from source observed
// when the task's status was recorded, within the expectation's life: no
// earlier than it was raised (an agent cannot backdate an outcome, say to
// look on time) and no later than now (now too when the agent did not
// say). Any other state changes nothing: the instant
// is then evaluated as usual. It returns the new record, whether it
// changed, and the effects of a satisfaction.
func Watched(r *Record, rt RemoteTask, source string, subj *SubjectRecord, now time.Time) (*Record, bool, *Effects) {
	if r.State != StateOpen || r.Expectation.WatchTask == nil {
		return r, false, nil
	}
	at := rt.At
	if at.IsZero() || at.After(now) {
		at = now
	}
	if raised, err := ParseTime(r.RaisedAt); err == nil && at.Before(raised) {
		at = raised
	}
	f := Fact{ObservedAt: FormatTime(at), Source: source}
	switch rt.State {
	case "completed":
		f.FactKey = r.Expectation.SatisfiedBy.FactKey
		out, eff := Satisfy(r, f, now)
		return out, true, &eff
	case "failed", "rejected", "canceled":
		f.FactKey = "a2a.task." + rt.State
		if rb := r.Expectation.RefutedBy; rb != nil {
			f.FactKey = rb.FactKey
		}
		out, changed := Refute(r, f, subj, now)
		return out, changed, nil
	}
	return r, false, nil
}
