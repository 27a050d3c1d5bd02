package expect

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Config holds the watcher's tunable rules.
type Config struct {
	// MaxLineage bounds how many superseded ancestors an expectation may have.
	MaxLineage int
	// MaxPerRequest bounds the expectations (and facts, and withdrawals) in
	// one request, so one request always fits one atomic commit.
	MaxPerRequest int
	// MaxFuture bounds how far ahead of the watcher's clock a dueAt or
	// horizon may be.
	MaxFuture time.Duration
	// MaxFactSkew bounds how far ahead of the watcher's clock a fact's
	// observedAt may be.
	MaxFactSkew time.Duration
	// Retain is how long a final record is kept (StampExpiry), and a
	// subject's memory after its last fact; zero keeps them forever.
	Retain time.Duration
	// FactLookbackMax bounds satisfiedBy.lookback and refutedBy.lookback,
	// and is how long the watcher remembers the facts it accepted
	// (-fact-lookback-max); zero turns lookback off.
	FactLookbackMax time.Duration
}

// DefaultFactLookbackMax is the default of Config.FactLookbackMax.
const DefaultFactLookbackMax = 24 * time.Hour

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxLineage:    16,
		MaxPerRequest: 50,
		MaxFuture:     100 * 366 * 24 * time.Hour,
		MaxFactSkew:   time.Hour,
		// A day covers a webhook that races a raise and a job that reports
		// before its agent declares it; longer windows keep facts longer.
		FactLookbackMax: DefaultFactLookbackMax,
	}
}

// FormatTime renders t as the watcher stores and returns instants: RFC 3339
// in UTC, with fractional seconds only when present.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTime parses an RFC 3339 instant and returns it in UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// mustTime parses a time the watcher itself stored; stored times are always
// valid, and a corrupt one reads as the zero time rather than panicking.
func mustTime(s string) time.Time {
	t, _ := ParseTime(s)
	return t
}

// messageIDSpace is the UUID namespace of lapse message ids.
var messageIDSpace = uuid.MustParse("5b0f3f8e-7d1c-4b7e-9a53-2f1d8c6e4a90")

// MessageID derives the lapse task's messageId from (expectationId, lapse,
// dueAt), so that every retry and duplicate of one lapse carries one id.
func MessageID(expectationID string, lapse LapseKind, dueAt string) string {
	b, _ := json.Marshal([]string{expectationID, string(lapse), dueAt})
	return uuid.NewSHA1(messageIDSpace, b).String()
}

// GraceEnd returns the record's current due time plus its grace.
func (r *Record) GraceEnd() time.Time {
	due := mustTime(r.DueAt)
	if r.Expectation.Grace == "" {
		return due
	}
	d, err := ParseDuration(r.Expectation.Grace)
	if err != nil {
		return due
	}
	return d.AddTo(due)
}

// horizon returns the record's horizon, if any.
func (r *Record) horizon() (time.Time, bool) {
	if r.Expectation.Horizon == "" {
		return time.Time{}, false
	}
	t, err := ParseTime(r.Expectation.Horizon)
	return t, err == nil
}

// Clone returns a deep copy, so that pure functions never alias their input.
func (r *Record) Clone() *Record {
	c := *r
	if r.SatisfiedBy != nil {
		c.SatisfiedBy = r.SatisfiedBy.clone()
	}
	if r.Lapse != nil {
		l := *r.Lapse
		l.SatisfiedAfter = slices.Clone(l.SatisfiedAfter)
		if l.RefutedBy != nil {
			l.RefutedBy = l.RefutedBy.clone()
		}
		c.Lapse = &l
	}
	if r.Delivery != nil {
		d := *r.Delivery
		c.Delivery = &d
	}
	if r.Ack != nil {
		a := *r.Ack
		c.Ack = &a
	}
	if r.Expectation.Anchor != nil {
		a := *r.Expectation.Anchor
		c.Expectation.Anchor = &a
	}
	if r.Expectation.RefutedBy != nil {
		rb := *r.Expectation.RefutedBy
		c.Expectation.RefutedBy = &rb
	}
	if r.Expectation.WatchTask != nil {
		w := *r.Expectation.WatchTask
		c.Expectation.WatchTask = &w
	}
	c.Expectation.After = slices.Clone(r.Expectation.After)
	return &c
}

func (f *Fact) clone() *Fact {
	c := *f
	if f.Subject != nil {
		s := *f.Subject
		c.Subject = &s
	}
	return &c
}

// Instants returns the instants at which the watcher must look at the
// record: none unless it is open; the due instant while it is not yet past
// due (omitted when grace is zero, as it coincides with the grace end); the
// grace end; and the horizon until it has been checked.
func Instants(r *Record) []Instant {
	if r.State != StateOpen {
		return nil
	}
	mk := func(k InstantKind, at time.Time) Instant {
		return Instant{AgentID: r.AgentID, ExpectationID: r.Expectation.ExpectationID, Kind: k, At: at}
	}
	due, graceEnd := mustTime(r.DueAt), r.GraceEnd()
	var out []Instant
	if !r.PastDue && graceEnd.After(due) {
		out = append(out, mk(InstantDue, due))
	}
	out = append(out, mk(InstantGrace, graceEnd))
	if h, ok := r.horizon(); ok && !r.HorizonChecked {
		out = append(out, mk(InstantHorizon, h))
	}
	return out
}

// NotYet reports whether in is still one of r's instants and has not come
// at now: a tick that arrived early (a clock stepped back between its
// dispatch and its tick, or a clock behind the one that dispatched it),
// which changes nothing and must be armed again rather than taken as done.
func NotYet(r *Record, in Instant, now time.Time) bool {
	if r == nil || !now.Before(in.At) {
		return false
	}
	for _, cur := range Instants(r) {
		if cur.Kind == in.Kind && cur.At.Equal(in.At) {
			return true
		}
	}
	return false
}

// NextInstant returns the earliest instant of the record, if it is open.
func NextInstant(r *Record) (Instant, bool) {
	ins := Instants(r)
	if len(ins) == 0 {
		return Instant{}, false
	}
	best := ins[0]
	for _, in := range ins[1:] {
		if in.At.Before(best.At) {
			best = in
		}
	}
	return best, true
}

// activeSince reports whether a fact was reported on the subject since t.
func activeSince(subj *SubjectRecord, t time.Time) bool {
	if subj == nil || subj.LastReportedAt == "" {
		return false
	}
	return !mustTime(subj.LastReportedAt).Before(t)
}

// lapse moves an open record to lapsed with the given kind, on the
// watcher's clock.
func lapse(r *Record, kind LapseKind, subj *SubjectRecord, now time.Time, satisfiedAfter []string) {
	l := &Lapse{
		ExpectationID:  r.Expectation.ExpectationID,
		Kind:           r.Expectation.Kind,
		Subject:        r.Expectation.Subject,
		Expects:        r.Expectation.Expects,
		Lapse:          kind,
		ProjectedDueAt: r.ProjectedDueAt,
		DueAt:          r.DueAt,
		LapsedAt:       FormatTime(now),
		SatisfiedAfter: satisfiedAfter,
		Lineage:        r.Lineage,
	}
	if activeSince(subj, mustTime(r.RaisedAt)) {
		l.LastFactAt = subj.LastFactAt
	}
	r.State = StateLapsed
	r.Lapse = l
	r.Delivery = &Delivery{MessageID: MessageID(l.ExpectationID, kind, l.DueAt)}
}

// Tick evaluates an open record against the watcher's clock: it marks the
// record past due once its due time has come, lapses it "overdue" once its
// grace has ended, and lapses it "stalled" once its horizon has passed with
// no fact on its subject since it was raised. Instants are taken in time
// order, so whichever of grace end and horizon comes first decides. subj
// may be nil (no fact ever reported on the subject). It returns the new
// record and whether anything changed; an early or repeated tick changes
// nothing.
func Tick(r *Record, subj *SubjectRecord, now time.Time) (*Record, bool) {
	if r.State != StateOpen {
		return r, false
	}
	out := r.Clone()
	changed := false
	due, graceEnd := mustTime(r.DueAt), r.GraceEnd()
	h, hasHorizon := r.horizon()
	checkHorizon := func() bool {
		if !hasHorizon || out.HorizonChecked || now.Before(h) {
			return false
		}
		out.HorizonChecked = true
		changed = true
		if !activeSince(subj, mustTime(r.RaisedAt)) {
			lapse(out, Stalled, subj, now, nil)
			return true
		}
		return false
	}
	if hasHorizon && h.Before(graceEnd) {
		if checkHorizon() {
			return out, true
		}
	}
	if !now.Before(due) && !out.PastDue {
		out.PastDue = true
		changed = true
	}
	if !now.Before(graceEnd) {
		lapse(out, Overdue, subj, now, nil)
		return out, true
	}
	checkHorizon()
	return out, changed
}

// Matches reports whether fact f satisfies record r: the fact keys are equal
// exactly, the subjects are equal when the fact names one, and the record
// is open or lapsed without a satisfying fact yet (a late fact is still
// recorded).
func Matches(f Fact, r *Record) bool {
	if r.Expectation.SatisfiedBy.FactKey != f.FactKey {
		return false
	}
	if f.Subject != nil && *f.Subject != r.Expectation.Subject {
		return false
	}
	return r.State == StateOpen || (r.State == StateLapsed && r.SatisfiedBy == nil)
}

// Refutes reports whether fact f refutes record r: r is open and names
// f's key in refutedBy, and the subjects are equal when the fact names one.
func Refutes(f Fact, r *Record) bool {
	rb := r.Expectation.RefutedBy
	if r.State != StateOpen || rb == nil || rb.FactKey != f.FactKey {
		return false
	}
	return f.Subject == nil || *f.Subject == r.Expectation.Subject
}

// Refute lapses an open record that fact f (already attributed by the
// watcher) Refutes, with lapse "refuted" at now; the lapse carries the
// fact. A record that is not open is returned unchanged.
func Refute(r *Record, f Fact, subj *SubjectRecord, now time.Time) (*Record, bool) {
	if r.State != StateOpen {
		return r, false
	}
	out := r.Clone()
	fc := f.clone()
	if fc.Subject == nil {
		s := r.Expectation.Subject
		fc.Subject = &s
	}
	fc.ObservedAt = FormatTime(mustTime(f.ObservedAt))
	lapse(out, Refuted, subj, now, nil)
	out.Lapse.RefutedBy = fc
	return out, true
}

// Effects are the follow-up changes a satisfaction implies.
type Effects struct {
	// SkipCheck lists predecessors ("after" ids) that lapse "skipped" if
	// still open.
	SkipCheck []string
	// AnchorObservedAt is the time dependents anchored on the satisfied
	// record re-anchor from.
	AnchorObservedAt time.Time
}

// Satisfy records fact f (already attributed by the watcher) on a record
// that Matches it. An open record becomes satisfied; a lapsed one keeps its
// state and lapse and records the fact as late. It returns the new record
// and the effects to apply to predecessors and dependents.
func Satisfy(r *Record, f Fact, now time.Time) (*Record, Effects) {
	out := r.Clone()
	observed := mustTime(f.ObservedAt)
	fc := f
	if fc.Subject == nil {
		s := r.Expectation.Subject
		fc.Subject = &s
	}
	fc.ObservedAt = FormatTime(observed)
	out.SatisfiedBy = &fc
	out.SatisfiedAt = FormatTime(now)
	out.ObservedAt = fc.ObservedAt
	if r.State == StateOpen {
		out.State = StateSatisfied
		out.Late = observed.After(mustTime(r.DueAt))
		out.PastDue = false
	} else {
		out.Late = true
	}
	return out, Effects{SkipCheck: slices.Clone(r.Expectation.After), AnchorObservedAt: observed}
}

// Skip lapses an open predecessor "skipped" because the records named in
// by were satisfied while it was open. Non-open records are unchanged.
func Skip(r *Record, by []string, subj *SubjectRecord, now time.Time) (*Record, bool) {
	if r.State != StateOpen {
		return r, false
	}
	out := r.Clone()
	lapse(out, Skipped, subj, now, slices.Clone(by))
	return out, true
}

// AnchoredOn reports whether anchor is the expectation dep was raised on
// (as its anchor, or in its after list): one raised no later than dep. An
// id is forgotten once its record has expired (retention) and may be
// raised again; that later expectation is not the one dep named, and
// neither its satisfaction moves dep nor dep's skips it.
func AnchoredOn(dep, anchor *Record) bool {
	d, err1 := ParseTime(dep.RaisedAt)
	a, err2 := ParseTime(anchor.RaisedAt)
	return err1 != nil || err2 != nil || !a.After(d)
}

// Reanchor moves an open dependent's due time to anchorObservedAt plus its
// anchor offset (projectedDueAt never changes), and evaluates it against
// the clock at once: if the new grace end has passed it lapses.
func Reanchor(r *Record, anchorObservedAt time.Time, subj *SubjectRecord, now time.Time) (*Record, bool) {
	if r.State != StateOpen || r.Expectation.Anchor == nil {
		return r, false
	}
	off, err := ParseDuration(r.Expectation.Anchor.Offset)
	if err != nil {
		return r, false
	}
	out := r.Clone()
	out.DueAt = FormatTime(off.AddTo(anchorObservedAt))
	out.PastDue = false
	out, _ = Tick(out, subj, now)
	// The tick may also have checked a horizon that has passed.
	return out, out.DueAt != r.DueAt || out.State != r.State || out.PastDue != r.PastDue || out.HorizonChecked != r.HorizonChecked
}

// Withdraw moves an open record to withdrawn with reason. Withdrawing a
// withdrawn record changes nothing; withdrawing a satisfied or lapsed one
// is an error with code Conflict.
func Withdraw(r *Record, reason string, now time.Time) (*Record, bool, error) {
	switch r.State {
	case StateWithdrawn:
		return r, false, nil
	case StateOpen:
	default:
		return r, false, conflictf("expectation %q is %s and can no longer be withdrawn", r.Expectation.ExpectationID, r.State)
	}
	out := r.Clone()
	out.State = StateWithdrawn
	out.PastDue = false
	out.WithdrawnReason = reason
	out.WithdrawnAt = FormatTime(now)
	return out, true, nil
}

// ObserveFact updates a subject's memory with a fact reported now. A fact
// counts as activity on the subject (it moves lastReportedAt) when it is new
// information: it satisfied an expectation or its observedAt is later than
// any seen before. Reporting the same fact twice therefore changes nothing.
func ObserveFact(subj *SubjectRecord, f Fact, satisfiedAny bool, now time.Time) (*SubjectRecord, bool) {
	out := *subj
	observed := mustTime(f.ObservedAt)
	newer := subj.LastFactAt == "" || observed.After(mustTime(subj.LastFactAt))
	if !newer && !satisfiedAny {
		return subj, false
	}
	if newer {
		out.LastFactAt = FormatTime(observed)
	}
	out.LastReportedAt = FormatTime(now)
	return &out, true
}

// Final reports whether a record has reached a state nothing but a late
// fact changes: satisfied, withdrawn (superseded included), or lapsed
// with its lapse task delivered, dead-lettered or not to be sent.
func Final(r *Record) bool {
	switch r.State {
	case StateSatisfied, StateWithdrawn:
		return true
	case StateLapsed:
		d := r.Delivery
		return d == nil || d.DeliveredAt != "" || d.DeadLettered || d.Suppressed
	}
	return false
}

// StampExpiry sets when a final record expires, keep after the write that
// made it final (now, on the watcher's clock), and clears it on a record
// that is not final (a replayed dead letter is pending again): the
// retention of -retain-expectations. A record keeps the expiry it was
// given while it stays final (a late fact does not extend it). keep <= 0
// keeps records forever.
func StampExpiry(r *Record, now time.Time, keep time.Duration) {
	switch {
	case keep <= 0 || !Final(r):
		r.ExpiresAt = ""
	case r.ExpiresAt == "":
		r.ExpiresAt = FormatTime(ExpiryTime(now, keep))
	}
}

// ExpiryTime is keep after now rounded up to the second: expiries are
// stored to the second (DynamoDB's TTL), never before their time.
func ExpiryTime(now time.Time, keep time.Duration) time.Time {
	t := now.Add(keep).UTC().Round(0)
	if t.Nanosecond() > 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t
}
