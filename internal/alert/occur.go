package alert

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
)

// FromExpectation returns what one change of an expectation record made
// happen (old is nil for a create): a lapse, a recovery (satisfied after it
// lapsed), a dead-lettered lapse task. raw is the new record as stored,
// carried in the event. The occurrences' keys are the same whenever the
// same change is seen again.
func FromExpectation(old, cur *expect.Record, raw json.RawMessage) []Occurrence {
	if cur == nil {
		return nil
	}
	about := Subject{
		ExpectationID: cur.Expectation.ExpectationID, Kind: cur.Expectation.Kind,
		SubjectType: cur.Expectation.Subject.Type, SubjectID: cur.Expectation.Subject.ID,
		Expects: cur.Expectation.Expects, DueAt: cur.DueAt,
	}
	if cur.Lapse != nil {
		about.Lapse, about.LapsedAt = string(cur.Lapse.Lapse), cur.Lapse.LapsedAt
	}
	base := cur.AgentID + "\x00" + cur.Expectation.ExpectationID
	var out []Occurrence
	mk := func(t EventType, at, key string) Occurrence {
		return Occurrence{Event: Event{Type: t, Timestamp: at, Data: EventData{AgentID: cur.AgentID, Record: raw}}, About: about, Key: string(t) + "\x00" + base + "\x00" + key}
	}
	if cur.Lapse != nil && (old == nil || old.Lapse == nil) {
		out = append(out, mk(Lapsed, cur.Lapse.LapsedAt, cur.Lapse.LapsedAt))
	}
	if cur.Lapse != nil && cur.SatisfiedBy != nil && (old == nil || old.SatisfiedBy == nil) {
		at := cur.SatisfiedAt
		if at == "" {
			at = cur.ObservedAt
		}
		out = append(out, mk(Recovered, at, cur.Lapse.LapsedAt))
	}
	if cur.Lapse != nil && cur.Ack != nil && (old == nil || old.Ack == nil) {
		o := mk(Acknowledged, cur.Ack.At, cur.Lapse.LapsedAt)
		o.Event.Data.AcknowledgedBy, o.Event.Data.Note = cur.Ack.By, cur.Ack.Note
		out = append(out, o)
	}
	if d := cur.Delivery; d != nil && d.DeadLettered && (old == nil || old.Delivery == nil || !old.Delivery.DeadLettered) {
		o := mk(DeliveryDead, d.NextAttemptAt, d.MessageID+"\x00"+strconv.Itoa(d.Attempts))
		if o.Event.Timestamp == "" && cur.Lapse != nil {
			o.Event.Timestamp = cur.Lapse.LapsedAt
		}
		o.Event.Data.Reason = d.LastError
		out = append(out, o)
	}
	return out
}

// FromVerification returns, when a VERIFY's verdict became final (old is
// the previous verdict, "" for a new VERIFY), a verification.completed
// occurrence and, when it is FAIL, a verification.failed one. raw is the
// VERIFY as stored.
func FromVerification(old anticipate.Verdict, v *anticipate.Verification, raw json.RawMessage) []Occurrence {
	if v == nil || !v.Verdict.Final() || old.Final() {
		return nil
	}
	raw = trimmed(v, raw)
	var failed []string
	for _, r := range v.Results {
		if r.Status == anticipate.StatusFail || r.Status == anticipate.StatusErrored {
			failed = append(failed, r.CriterionID)
		}
	}
	for _, id := range v.AntiCriteriaFailed {
		failed = appendUnique(failed, id)
	}
	completed := Occurrence{
		Event: Event{Type: VerificationCompleted, Timestamp: v.Timestamp, Data: EventData{
			AgentID: v.AgentID, AnticipationID: v.AnticipationID, PlanID: v.PlanID,
			Verification: raw, FailedCriteria: failed, Verdict: string(v.Verdict),
		}},
		Key:     string(VerificationCompleted) + "\x00" + v.AgentID + "\x00" + v.VerificationID,
		Verdict: string(v.Verdict),
	}
	if v.Verdict != anticipate.VerdictFail {
		return []Occurrence{completed}
	}
	return []Occurrence{completed, {
		Event: Event{Type: VerificationFailed, Timestamp: v.Timestamp, Data: EventData{
			AgentID: v.AgentID, AnticipationID: v.AnticipationID, PlanID: v.PlanID,
			Verification: raw, FailedCriteria: failed,
		}},
		Key:     string(VerificationFailed) + "\x00" + v.AgentID + "\x00" + v.VerificationID,
		Verdict: string(v.Verdict),
	}}
}

// MaxNotifiedVerification bounds the VERIFY a notification carries: its
// item holds the VERIFY and more, within the store's 400 KB. A larger one
// is carried with each result's evidence and rationale cut to
// maxNotifiedText bytes (its signatures then no longer check; GET
// /v1/verifications/{id} has it whole).
const (
	MaxNotifiedVerification = 256 << 10
	maxNotifiedText         = 256
)

// trimmed returns raw, or v cut down when raw is over
// MaxNotifiedVerification.
func trimmed(v *anticipate.Verification, raw json.RawMessage) json.RawMessage {
	if len(raw) <= MaxNotifiedVerification {
		return raw
	}
	cut := *v
	cut.Results = make([]anticipate.Result, len(v.Results))
	for i, r := range v.Results {
		r.Evidence, r.Rationale = clip(r.Evidence), clip(r.Rationale)
		cut.Results[i] = r
	}
	b, err := json.Marshal(cut)
	if err != nil {
		return raw
	}
	return b
}

func clip(s string) string {
	if len(s) <= maxNotifiedText {
		return s
	}
	i := maxNotifiedText
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func appendUnique(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}
