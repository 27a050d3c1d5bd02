package expect

// Property test of the watcher's state machine: random interleavings of
// raises, facts, withdrawals, supersedes, anchor satisfactions and clock
// ticks, applied to an in-memory model (a map of records and a map of
// subject memories) built only with the package's pure functions, the way
// internal/watcher's service composes them. The invariants of design.md §3
// are checked after every step. rapid shrinks a failure to a minimal
// sequence and prints it (each action logs what it did).
//
//	go test -race -run TestPropertyMachine ./internal/expect -rapid.checks=2000

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"pgregory.net/rapid"
)

var (
	propStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	propZone  = time.FixedZone("UTC+2", 2*3600)

	propSubjects = []Subject{{Type: "invoice", ID: "1"}, {Type: "invoice", ID: "2"}, {Type: "order", ID: "1"}}
	// Subjects that are nearly, but not, one of propSubjects.
	propNearSubjects = []Subject{{Type: "invoice", ID: "1 "}, {Type: "Invoice", ID: "1"}, {Type: "order", ID: "2"}}
	propKeys         = []string{"invoice.paid", "invoice.sent", "order.shipped"}
	propGraces       = []string{"", "", "PT0S", "PT30M", "PT2H", "P1D", "P1M"}
	propOffsets      = []string{"PT0S", "PT1H", "PT3H", "P1D"}
	propUnknownIDs   = []string{"nope", "E0", "e0 ", "e"}
)

// propStats counts what the generated sequences exercised (logged with -v).
var propStats = map[string]int{}

func propIDs() []string {
	ids := make([]string, 24)
	for i := range ids {
		ids[i] = fmt.Sprintf("e%d", i)
	}
	return ids
}

// propNearKey returns a fact key that differs from k only slightly.
func propNearKey(k string, how int) string {
	switch how % 5 {
	case 0:
		return k + " "
	case 1:
		return strings.ToUpper(k[:1]) + k[1:]
	case 2:
		return k + ".x"
	case 3:
		return k[:len(k)-1]
	default:
		return " " + k
	}
}

type propModel struct {
	cfg   Config
	card  Card
	now   time.Time
	recs  map[string]*Record
	order []string // ids in creation order
	subs  map[Subject]*SubjectRecord

	// What the checks remember from earlier steps.
	prev     map[string]*Record // id -> copy of the record after the previous step
	prevSubs map[Subject]SubjectRecord
	body     map[string]Expectation // id -> copy of the body when first raised
	fixed    map[string][4]any      // id -> ProjectedDueAt, RaisedAt, Lineage, TaskID when first raised
	msgIDs   map[string]string      // id -> lapse message id when it first lapsed
}

func propJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// propCopy deep-copies a record independently of Record.Clone, so that a
// mutation of a function's input is seen even if Clone shared memory.
func propCopy(r *Record) *Record {
	if r == nil {
		return nil
	}
	c := *r
	if r.SatisfiedBy != nil {
		f := *r.SatisfiedBy
		if f.Subject != nil {
			s := *f.Subject
			f.Subject = &s
		}
		c.SatisfiedBy = &f
	}
	if r.Lapse != nil {
		l := *r.Lapse
		if l.SatisfiedAfter != nil {
			l.SatisfiedAfter = append([]string{}, l.SatisfiedAfter...)
		}
		c.Lapse = &l
	}
	if r.Delivery != nil {
		d := *r.Delivery
		c.Delivery = &d
	}
	c.Expectation = propCopyExp(r.Expectation)
	return &c
}

func propCopyExp(e Expectation) Expectation {
	if e.Anchor != nil {
		a := *e.Anchor
		e.Anchor = &a
	}
	if e.After != nil {
		e.After = append([]string{}, e.After...)
	}
	return e
}

func propEq(a, b any) bool { return reflect.DeepEqual(a, b) }

func (m *propModel) snapshot() map[string]*Record {
	out := make(map[string]*Record, len(m.recs))
	for id, r := range m.recs {
		out[id] = propCopy(r)
	}
	return out
}

func recsEqual(a, b map[string]*Record) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		if !propEq(r, b[id]) {
			return false
		}
	}
	return true
}

func (m *propModel) subSnapshot() map[Subject]SubjectRecord {
	out := make(map[Subject]SubjectRecord, len(m.subs))
	for s, r := range m.subs {
		out[s] = *r
	}
	return out
}

// sub returns the subject memory as the service loads it: never nil.
func (m *propModel) sub(s Subject) *SubjectRecord {
	if r := m.subs[s]; r != nil {
		return r
	}
	return &SubjectRecord{AgentID: m.card.AgentID, Subject: s}
}

func (m *propModel) ids(pred func(*Record) bool) []string {
	var out []string
	for _, id := range m.order {
		if pred(m.recs[id]) {
			out = append(out, id)
		}
	}
	return out
}

func (m *propModel) unusedIDs() []string {
	var out []string
	for _, id := range propIDs() {
		if m.recs[id] == nil {
			out = append(out, id)
		}
	}
	return out
}

func propActive(subj *SubjectRecord, since string) bool {
	return subj != nil && subj.LastReportedAt != "" && !mustTime(subj.LastReportedAt).Before(mustTime(since))
}

func propTime(rt *rapid.T, base time.Time, loMin, hiMin int, label string) time.Time {
	t := base.Add(time.Duration(rapid.IntRange(loMin, hiMin).Draw(rt, label)) * time.Minute)
	if rapid.IntRange(0, 7).Draw(rt, label+"Jitter") == 0 {
		t = t.Add(time.Duration(rapid.IntRange(1, 59).Draw(rt, label+"Sec")) * time.Second)
	}
	return t
}

func propFormat(rt *rapid.T, t time.Time, label string) string {
	if rapid.IntRange(0, 4).Draw(rt, label+"Zone") == 0 {
		return t.In(propZone).Format(time.RFC3339Nano) // stored in UTC, body kept as sent
	}
	return FormatTime(t)
}

// genExpectation draws a new body for id. earlier holds the bodies raised
// before it in the same batch.
func (m *propModel) genExpectation(rt *rapid.T, id string, earlier []Expectation) Expectation {
	subj := rapid.SampledFrom(propSubjects).Draw(rt, "subject")
	e := Expectation{
		ExpectationID: id,
		Kind:          "payment",
		Subject:       subj,
		Expects:       "expects " + id,
		SatisfiedBy:   SatisfiedBy{FactKey: rapid.SampledFrom(propKeys).Draw(rt, "factKey")},
		DueAt:         propFormat(rt, propTime(rt, m.now, -180, 1440, "due"), "due"),
		Grace:         rapid.SampledFrom(propGraces).Draw(rt, "grace"),
		Basis:         "contract",
	}
	if rapid.IntRange(0, 2).Draw(rt, "hasHorizon") == 0 {
		e.Horizon = propFormat(rt, propTime(rt, m.now, -120, 1440, "horizon"), "horizon")
	}
	prior := slices.Clone(m.order)
	subjOf := map[string]Subject{}
	for _, id := range m.order {
		subjOf[id] = m.recs[id].Expectation.Subject
	}
	for _, b := range earlier {
		if !slices.Contains(prior, b.ExpectationID) {
			prior = append(prior, b.ExpectationID)
		}
		subjOf[b.ExpectationID] = b.Subject
	}
	if len(prior) > 0 && rapid.IntRange(0, 2).Draw(rt, "hasAnchor") == 0 {
		e.Anchor = &Anchor{
			ExpectationID: rapid.SampledFrom(prior).Draw(rt, "anchor"),
			Offset:        rapid.SampledFrom(propOffsets).Draw(rt, "anchorOffset"),
		}
	}
	var same []string
	for _, id := range prior {
		if subjOf[id] == subj && id != e.ExpectationID {
			same = append(same, id)
		}
	}
	if len(same) > 0 && rapid.IntRange(0, 1).Draw(rt, "hasAfter") == 0 {
		n := rapid.IntRange(1, min(2, len(same))).Draw(rt, "afterLen")
		e.After = rapid.Permutation(same).Draw(rt, "after")[:n]
	}
	if rapid.IntRange(0, 24).Draw(rt, "badAfter") == 0 {
		e.After = append(e.After, rapid.SampledFrom(append(prior, "nope")).Draw(rt, "badAfterID"))
	}
	if rapid.IntRange(0, 4).Draw(rt, "hasSupersedes") == 0 {
		var cands []string
		for _, id := range prior {
			if r := m.recs[id]; r == nil || r.State == StateOpen {
				cands = append(cands, id)
			}
		}
		if rapid.IntRange(0, 5).Draw(rt, "supersedeAny") == 0 {
			cands = prior
		}
		if len(cands) > 0 {
			e.Supersedes = rapid.SampledFrom(cands).Draw(rt, "supersedes")
		}
	}
	return e
}

// applyRaise runs Raise as the service does (loading the referenced
// records), checks its result and applies its writes.
func (m *propModel) applyRaise(rt *rapid.T, req RaiseRequest) (RaiseResult, error) {
	before := m.snapshot()
	existing := map[string]*Record{}
	for _, id := range req.References() {
		if r := m.recs[id]; r != nil {
			existing[id] = r
		}
	}
	// A Conflict is due exactly when the first occurrence of an existing id
	// in the batch carries another body.
	wantConflict := ""
	seen := map[string]bool{}
	for _, e := range req.Expectations {
		if seen[e.ExpectationID] {
			continue
		}
		seen[e.ExpectationID] = true
		if old := m.recs[e.ExpectationID]; old != nil && propJSON(old.Expectation) != propJSON(e) {
			wantConflict = e.ExpectationID
			break
		}
	}
	res, err := Raise(m.card, req, existing, m.now, m.cfg)
	if got := m.snapshot(); !recsEqual(got, before) {
		rt.Fatalf("Raise mutated the records it was given")
	}
	rt.Logf("raise %s at %s -> %d writes, err=%v", propJSON(req.Expectations), FormatTime(m.now), len(res.Writes), err)
	switch {
	case errs.Is(err, errs.Conflict):
		propStats["raise: conflict"]++
	case err != nil:
		propStats["raise: invalid"]++
	default:
		propStats["raise: ok"]++
		for i, e := range req.Expectations {
			switch {
			case m.recs[e.ExpectationID] != nil:
				propStats["raise: idempotent retry"]++
			case e.Supersedes != "":
				propStats[fmt.Sprintf("raise: supersede to lineage %d", res.Records[i].Lineage)]++
			case res.Records[i].DueAt != res.Records[i].ProjectedDueAt:
				propStats["raise: anchor already satisfied"]++
			}
		}
	}
	if err != nil {
		switch {
		case wantConflict != "" && !errs.Is(err, errs.Conflict):
			rt.Fatalf("raising %q again with another body must be a Conflict, got %v", wantConflict, err)
		case wantConflict == "" && !errs.Is(err, errs.Invalid):
			rt.Fatalf("raise failed with %v, want an Invalid error (no id reused with another body)", err)
		}
		// Nothing changes: the caller writes nothing on an error. (On a
		// Conflict, Raise may return the retries it saw before the conflict in
		// res.Records; callers must ignore res when err != nil.)
		return RaiseResult{}, err
	}
	if wantConflict != "" {
		rt.Fatalf("raising %q again with another body succeeded", wantConflict)
	}
	if len(res.Records) != len(req.Expectations) || len(res.Writes) != len(res.Created) {
		rt.Fatalf("raise result shape: %d records for %d expectations, %d writes, %d created", len(res.Records), len(req.Expectations), len(res.Writes), len(res.Created))
	}
	supersededBy := map[string]string{}
	for _, e := range req.Expectations {
		if e.Supersedes != "" && m.recs[e.ExpectationID] == nil {
			supersededBy[e.Supersedes] = e.ExpectationID
		}
	}
	lineageOf := map[string]int{}
	for i, e := range req.Expectations {
		rec := res.Records[i]
		id := e.ExpectationID
		if rec.Expectation.ExpectationID != id {
			rt.Fatalf("records[%d] is %q, want %q", i, rec.Expectation.ExpectationID, id)
		}
		if old := m.recs[id]; old != nil {
			if !propEq(rec, before[id]) {
				rt.Fatalf("an identical retry of %q must return the existing record:\n got %s\nwant %s", id, propJSON(rec), propJSON(before[id]))
			}
			lineageOf[id] = old.Lineage
			continue
		}
		if propJSON(rec.Expectation) != propJSON(e) {
			rt.Fatalf("%q: stored body %s differs from the raised one %s", id, propJSON(rec.Expectation), propJSON(e))
		}
		due, _ := ParseTime(e.DueAt)
		if rec.ProjectedDueAt != FormatTime(due) || rec.RaisedAt != FormatTime(m.now) {
			rt.Fatalf("%q: projectedDueAt %s raisedAt %s, want %s and %s", id, rec.ProjectedDueAt, rec.RaisedAt, FormatTime(due), FormatTime(m.now))
		}
		wantDue := FormatTime(due)
		if e.Anchor != nil {
			if a := m.recs[e.Anchor.ExpectationID]; a != nil && a.SatisfiedBy != nil {
				off, _ := ParseDuration(e.Anchor.Offset)
				wantDue = FormatTime(off.AddTo(mustTime(a.ObservedAt)))
			}
		}
		if rec.DueAt != wantDue {
			rt.Fatalf("%q: dueAt %s, want %s", id, rec.DueAt, wantDue)
		}
		wantState := StateOpen
		if by, ok := supersededBy[id]; ok {
			wantState = StateWithdrawn
			if rec.WithdrawnReason != "superseded by "+by {
				rt.Fatalf("%q superseded in its own batch: reason %q", id, rec.WithdrawnReason)
			}
		}
		if rec.State != wantState {
			rt.Fatalf("%q: new record is %s, want %s", id, rec.State, wantState)
		}
		wantLineage := 0
		if e.Supersedes != "" {
			l, ok := lineageOf[e.Supersedes]
			if old := m.recs[e.Supersedes]; old != nil {
				l, ok = old.Lineage, true
			}
			if !ok {
				rt.Fatalf("%q supersedes %q, which is neither raised nor earlier in the batch", id, e.Supersedes)
			}
			wantLineage = l + 1
		}
		if rec.Lineage != wantLineage || rec.Lineage > m.cfg.MaxLineage {
			rt.Fatalf("%q: lineage %d, want %d (bound %d)", id, rec.Lineage, wantLineage, m.cfg.MaxLineage)
		}
		lineageOf[id] = rec.Lineage
	}
	createdIDs := map[string]bool{}
	for i, w := range res.Writes {
		id := w.Expectation.ExpectationID
		old := m.recs[id]
		if res.Created[i] {
			if old != nil || createdIDs[id] {
				rt.Fatalf("raise creates %q again: ids are never reused", id)
			}
			createdIDs[id] = true
			continue
		}
		if old == nil || old.State != StateOpen {
			rt.Fatalf("raise updates %q, which was not an open record", id)
		}
		by, ok := supersededBy[id]
		if !ok || w.State != StateWithdrawn || w.WithdrawnReason != "superseded by "+by {
			rt.Fatalf("raise updates %q to %s (%q), want withdrawn, superseded by %q", id, w.State, w.WithdrawnReason, by)
		}
	}
	for old := range supersededBy {
		if m.recs[old] == nil {
			continue
		}
		found := false
		for i, w := range res.Writes {
			found = found || (!res.Created[i] && w.Expectation.ExpectationID == old)
		}
		if !found {
			rt.Fatalf("%q was superseded but is not withdrawn in the same result", old)
		}
	}
	for _, e := range req.Expectations {
		if m.recs[e.ExpectationID] == nil && !createdIDs[e.ExpectationID] {
			rt.Fatalf("new %q is not among the writes", e.ExpectationID)
		}
	}
	for _, w := range res.Writes {
		id := w.Expectation.ExpectationID
		if m.recs[id] == nil {
			m.order = append(m.order, id)
		}
		m.recs[id] = w
	}
	return res, nil
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// applyFact applies a reported fact as the service does: match, subject
// memory, satisfy, skip open predecessors; then (as the change feed does)
// re-anchor the dependents of every newly satisfied record.
func (m *propModel) applyFact(rt *rapid.T, f Fact) {
	before := m.snapshot()
	beforeRecs := map[string]*Record{}
	for id, r := range m.recs {
		beforeRecs[id] = r
	}
	beforeSubs := m.subSnapshot()
	observed := mustTime(f.ObservedAt)

	var matched, oracle []string
	for _, id := range m.order {
		r := m.recs[id]
		if Matches(f, r) {
			matched = append(matched, id)
		}
		if r.Expectation.SatisfiedBy.FactKey == f.FactKey &&
			(f.Subject == nil || *f.Subject == r.Expectation.Subject) &&
			(r.State == StateOpen || r.State == StateLapsed && r.SatisfiedBy == nil) {
			oracle = append(oracle, id)
		}
	}
	if !slices.Equal(matched, oracle) {
		rt.Fatalf("fact %s matches %v, want %v", propJSON(f), matched, oracle)
	}
	var subjects []Subject
	if f.Subject != nil {
		subjects = append(subjects, *f.Subject)
	} else {
		for _, id := range matched {
			if s := m.recs[id].Expectation.Subject; !slices.Contains(subjects, s) {
				subjects = append(subjects, s)
			}
		}
	}
	for _, s := range subjects {
		old := m.sub(s)
		oldCopy := *old
		ns, changed := ObserveFact(old, f, len(matched) > 0, m.now)
		if *old != oldCopy {
			rt.Fatalf("ObserveFact mutated its input")
		}
		if !changed && *ns != oldCopy {
			rt.Fatalf("ObserveFact reports no change but changed %+v to %+v", oldCopy, *ns)
		}
		if changed {
			m.subs[s] = ns
		}
		if l := m.sub(s).LastFactAt; l == "" || mustTime(l).Before(observed) {
			rt.Fatalf("subject %v lastFactAt %q after a fact observed at %s", s, l, f.ObservedAt)
		}
	}
	may := map[string]bool{} // ids this fact may change
	for _, id := range matched {
		may[id] = true
		r := m.recs[id]
		rj := propCopy(r)
		nr, eff := Satisfy(r, f, m.now)
		if !propEq(r, rj) {
			rt.Fatalf("Satisfy mutated its input")
		}
		m.recs[id] = nr
		sub := m.sub(r.Expectation.Subject)
		for _, pid := range eff.SkipCheck {
			p := m.recs[pid]
			if p == nil {
				continue
			}
			if p.State == StateOpen {
				may[pid] = true
			}
			pj := propCopy(p)
			np, changed := Skip(p, []string{id}, sub, m.now)
			m.checkChanged(rt, "Skip", pj, p, np, changed)
			if changed {
				if np.State != StateLapsed || np.Lapse.Lapse != Skipped || !slices.Equal(np.Lapse.SatisfiedAfter, []string{id}) {
					rt.Fatalf("Skip of %q after %q: %s", pid, id, propJSON(np))
				}
				m.recs[pid] = np
				propStats["skip"]++
			}
		}
	}
	// The change feed: dependents re-anchor on each newly satisfied anchor.
	for _, id := range matched {
		a := m.recs[id]
		for _, did := range m.order {
			d := m.recs[did]
			if d.Expectation.Anchor == nil || d.Expectation.Anchor.ExpectationID != id {
				continue
			}
			wasOpen := d.State == StateOpen
			if wasOpen {
				may[did] = true
			}
			dj := propCopy(d)
			nd, changed := Reanchor(d, mustTime(a.ObservedAt), m.sub(d.Expectation.Subject), m.now)
			m.checkChanged(rt, "Reanchor", dj, d, nd, changed)
			if !changed {
				continue
			}
			m.recs[did] = nd
			propStats["reanchor: "+string(nd.State)]++
			off, _ := ParseDuration(d.Expectation.Anchor.Offset)
			want := FormatTime(off.AddTo(mustTime(a.ObservedAt)))
			if nd.DueAt != want {
				rt.Fatalf("%q re-anchored on %q observed at %s: dueAt %s, want %s", did, id, a.ObservedAt, nd.DueAt, want)
			}
			if nd.State == StateOpen && !m.now.Before(nd.GraceEnd()) {
				rt.Fatalf("%q re-anchored to a grace end %s already past at %s but is still open", did, FormatTime(nd.GraceEnd()), FormatTime(m.now))
			}
			if nd.State != StateOpen && nd.State != StateLapsed {
				rt.Fatalf("%q re-anchored into state %s", did, nd.State)
			}
		}
	}
	rt.Logf("fact %s at %s -> satisfies %v", propJSON(f), FormatTime(m.now), matched)
	propStats[fmt.Sprintf("fact: satisfies %d", min(len(matched), 3))]++
	for id, r := range m.recs {
		if propEq(r, before[id]) {
			continue
		}
		if !may[id] {
			rt.Fatalf("fact %s changed %q, which it neither satisfies, skips nor re-anchors:\n%s\n%s", propJSON(f), id, propJSON(before[id]), propJSON(r))
		}
		old := beforeRecs[id]
		if old.SatisfiedBy == nil && r.SatisfiedBy != nil {
			propStats["fact: "+string(old.State)+" -> "+string(r.State)]++
			e := r.Expectation
			if !slices.Contains(matched, id) || e.SatisfiedBy.FactKey != f.FactKey || r.SatisfiedBy.FactKey != f.FactKey ||
				(f.Subject != nil && *f.Subject != e.Subject) || r.SatisfiedBy.Subject == nil || *r.SatisfiedBy.Subject != e.Subject {
				rt.Fatalf("fact %s satisfied %q (key %q, subject %v): %s", propJSON(f), id, e.SatisfiedBy.FactKey, e.Subject, propJSON(r))
			}
			if r.ObservedAt != FormatTime(observed) || r.SatisfiedAt != FormatTime(m.now) {
				rt.Fatalf("%q satisfied: observedAt %s satisfiedAt %s", id, r.ObservedAt, r.SatisfiedAt)
			}
		}
	}
	for s, old := range beforeSubs {
		if !slices.Contains(subjects, s) && *m.subs[s] != old {
			rt.Fatalf("fact %s changed the memory of subject %v it is not about", propJSON(f), s)
		}
	}
}

// checkChanged checks a pure function's changed flag against its result
// and that it did not touch its input.
func (m *propModel) checkChanged(rt *rapid.T, name string, inBefore, in, out *Record, changed bool) {
	if !propEq(in, inBefore) {
		rt.Fatalf("%s mutated its input", name)
	}
	differs := !propEq(in, out)
	if differs != changed {
		rt.Fatalf("%s of %q reports changed=%v but the record %s:\n in  %s\n out %s", name, in.Expectation.ExpectationID, changed,
			map[bool]string{true: "differs", false: "is the same"}[differs], propJSON(in), propJSON(out))
	}
}

func (m *propModel) factAction(rt *rapid.T, f Fact) {
	m.applyFact(rt, f)
	if rapid.IntRange(0, 2).Draw(rt, "reportTwice") == 0 {
		recs, subs := m.snapshot(), m.subSnapshot()
		m.applyFact(rt, f)
		if !recsEqual(recs, m.snapshot()) || !mapsEqual(subs, m.subSnapshot()) {
			rt.Fatalf("reporting fact %s twice changed something", propJSON(f))
		}
	}
}

func (m *propModel) drawFactTime(rt *rapid.T) string {
	return propFormat(rt, propTime(rt, m.now, -240, 60, "observed"), "observed")
}

func (m *propModel) tick(rt *rapid.T) {
	steps := []time.Duration{0, time.Second, time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour}
	d := rapid.SampledFrom(steps).Draw(rt, "advance")
	if rapid.IntRange(0, 3).Draw(rt, "advanceRandom") == 0 {
		d = time.Duration(rapid.IntRange(0, 600).Draw(rt, "advanceMinutes")) * time.Minute
	}
	m.now = m.now.Add(d)
	rt.Logf("tick +%s -> %s", d, FormatTime(m.now))
	for _, id := range m.order {
		r := m.recs[id]
		if r.State != StateOpen {
			if out, changed := Tick(r, m.sub(r.Expectation.Subject), m.now); changed || out != r {
				rt.Fatalf("Tick changed closed record %q", id)
			}
			continue
		}
		subj := m.sub(r.Expectation.Subject)
		rj := propCopy(r)
		out, changed := Tick(r, subj, m.now)
		m.checkChanged(rt, "Tick", rj, r, out, changed)
		again, changed2 := Tick(out, subj, m.now)
		if changed2 || !propEq(again, out) {
			rt.Fatalf("Tick of %q is not idempotent at %s:\n once  %s\n twice %s", id, FormatTime(m.now), propJSON(out), propJSON(again))
		}
		m.recs[id] = out
		if out.State == StateLapsed {
			propStats["tick: lapse "+string(out.Lapse.Lapse)]++
		}
		graceEnd := out.GraceEnd()
		h, hasH := out.horizon()
		active := propActive(subj, out.RaisedAt)
		stallDue := hasH && !r.HorizonChecked && !m.now.Before(h) && !active
		switch out.State {
		case StateOpen:
			if !m.now.Before(graceEnd) {
				rt.Fatalf("%q is open after a tick at %s, past its grace end %s", id, FormatTime(m.now), FormatTime(graceEnd))
			}
			if stallDue {
				rt.Fatalf("%q is open after a tick at %s, past its horizon %s with no fact since it was raised", id, FormatTime(m.now), FormatTime(h))
			}
			if !m.now.Before(mustTime(out.DueAt)) != out.PastDue {
				rt.Fatalf("%q: pastDue=%v after a tick at %s with dueAt %s", id, out.PastDue, FormatTime(m.now), out.DueAt)
			}
		case StateLapsed:
			switch out.Lapse.Lapse {
			case Stalled:
				if !stallDue || !h.Before(graceEnd) {
					rt.Fatalf("%q lapsed stalled at %s (horizon %s, grace end %s, active %v)", id, FormatTime(m.now), FormatTime(h), FormatTime(graceEnd), active)
				}
			case Overdue:
				if m.now.Before(graceEnd) || (stallDue && h.Before(graceEnd)) {
					rt.Fatalf("%q lapsed overdue at %s (horizon %v %s, grace end %s, active %v)", id, FormatTime(m.now), hasH, FormatTime(h), FormatTime(graceEnd), active)
				}
			default:
				rt.Fatalf("%q lapsed %s on a tick", id, out.Lapse.Lapse)
			}
			if out.Lapse.LapsedAt != FormatTime(m.now) {
				rt.Fatalf("%q lapsedAt %s, want the watcher's clock %s", id, out.Lapse.LapsedAt, FormatTime(m.now))
			}
		default:
			rt.Fatalf("tick moved %q to %s", id, out.State)
		}
	}
	// Monotone: a tick at an earlier time than the one just applied changes
	// nothing.
	back := time.Duration(rapid.IntRange(1, 600).Draw(rt, "backMinutes")) * time.Minute
	for _, id := range m.order {
		r := m.recs[id]
		for _, at := range []time.Time{m.now.Add(-back), m.now.Add(-time.Nanosecond), mustTime(r.RaisedAt)} {
			if at.After(m.now) {
				continue
			}
			if out, changed := Tick(r, m.sub(r.Expectation.Subject), at); changed || !propEq(out, r) {
				rt.Fatalf("a tick of %q at %s, earlier than the tick at %s, changed it:\n%s\n%s", id, FormatTime(at), FormatTime(m.now), propJSON(r), propJSON(out))
			}
		}
	}
}

// check runs the invariants that hold after every step.
func (m *propModel) check(rt *rapid.T) {
	for id, p := range m.prev {
		r := m.recs[id]
		if r == nil {
			rt.Fatalf("record %q disappeared", id)
		}
		if propEq(r, p) {
			continue
		}
		was := propJSON(p)
		if p.State != StateOpen && p.State != r.State {
			rt.Fatalf("%q moved from %s to %s", id, p.State, r.State)
		}
		switch p.State {
		case StateSatisfied, StateWithdrawn:
			if propJSON(r) != was {
				rt.Fatalf("closed record %q changed:\n%s\n%s", id, was, propJSON(r))
			}
		case StateLapsed:
			// Only a late fact may add to a lapsed record, once.
			c := *r
			if p.SatisfiedBy == nil {
				c.SatisfiedBy, c.SatisfiedAt, c.ObservedAt, c.Late = nil, "", "", false
			}
			if propJSON(&c) != was {
				rt.Fatalf("lapsed record %q changed beyond a late fact:\n%s\n%s", id, was, propJSON(r))
			}
		}
	}
	for s, was := range m.prevSubs {
		now := m.subs[s]
		if now == nil ||
			was.LastFactAt != "" && (now.LastFactAt == "" || mustTime(now.LastFactAt).Before(mustTime(was.LastFactAt))) ||
			was.LastReportedAt != "" && (now.LastReportedAt == "" || mustTime(now.LastReportedAt).Before(mustTime(was.LastReportedAt))) {
			rt.Fatalf("subject memory %v went back: %+v -> %+v", s, was, now)
		}
	}
	for _, id := range m.order {
		r := m.recs[id]
		e := r.Expectation
		if e.ExpectationID != id {
			rt.Fatalf("record under %q has id %q", id, e.ExpectationID)
		}
		fixed := [4]any{r.ProjectedDueAt, r.RaisedAt, r.Lineage, r.TaskID}
		if b, ok := m.body[id]; !ok {
			m.body[id], m.fixed[id] = propCopyExp(e), fixed
		} else if !propEq(b, e) || m.fixed[id] != fixed {
			rt.Fatalf("%q: body or projectedDueAt/raisedAt/lineage changed after raise:\n%s %v\n%s %v", id, propJSON(b), m.fixed[id], propJSON(e), fixed)
		}
		if r.Lineage < 0 || r.Lineage > m.cfg.MaxLineage {
			rt.Fatalf("%q: lineage %d outside [0, %d]", id, r.Lineage, m.cfg.MaxLineage)
		}
		if e.Supersedes != "" {
			old := m.recs[e.Supersedes]
			if old == nil || r.Lineage != old.Lineage+1 || old.State != StateWithdrawn || old.WithdrawnReason != "superseded by "+id {
				rt.Fatalf("%q (lineage %d) supersedes %q: %s", id, r.Lineage, e.Supersedes, propJSON(old))
			}
		} else if r.Lineage != 0 {
			rt.Fatalf("%q supersedes nothing but has lineage %d", id, r.Lineage)
		}
		// States and what each carries.
		switch r.State {
		case StateOpen:
			if r.Lapse != nil || r.SatisfiedBy != nil || r.Delivery != nil || r.WithdrawnAt != "" {
				rt.Fatalf("open %q carries closing fields: %s", id, propJSON(r))
			}
		case StateSatisfied:
			if r.Lapse != nil || r.SatisfiedBy == nil || r.PastDue {
				rt.Fatalf("satisfied %q: %s", id, propJSON(r))
			}
			if late := mustTime(r.ObservedAt).After(mustTime(r.DueAt)); r.Late != late {
				rt.Fatalf("satisfied %q: late=%v, observedAt %s dueAt %s", id, r.Late, r.ObservedAt, r.DueAt)
			}
		case StateWithdrawn:
			if r.Lapse != nil || r.SatisfiedBy != nil || r.WithdrawnAt == "" || r.PastDue {
				rt.Fatalf("withdrawn %q: %s", id, propJSON(r))
			}
		case StateLapsed:
			l := r.Lapse
			if l == nil {
				rt.Fatalf("lapsed %q has no lapse", id)
			}
			if l.Lapse != Overdue && l.Lapse != Skipped && l.Lapse != Stalled {
				rt.Fatalf("lapsed %q: kind %q", id, l.Lapse)
			}
			if l.ExpectationID != id || l.DueAt != r.DueAt || l.ProjectedDueAt != r.ProjectedDueAt || l.Lineage != r.Lineage || l.Subject != e.Subject {
				rt.Fatalf("lapsed %q: lapse %s does not describe the record %s", id, propJSON(l), propJSON(r))
			}
			if r.Delivery == nil || r.Delivery.MessageID != MessageID(id, l.Lapse, l.DueAt) {
				rt.Fatalf("lapsed %q: delivery %s, want message id %s", id, propJSON(r.Delivery), MessageID(id, l.Lapse, l.DueAt))
			}
			if mustTime(l.LapsedAt).Before(mustTime(r.RaisedAt)) {
				rt.Fatalf("lapsed %q at %s, before it was raised at %s", id, l.LapsedAt, r.RaisedAt)
			}
			if (l.Lapse == Skipped) != (len(l.SatisfiedAfter) > 0) {
				rt.Fatalf("lapsed %q %s with satisfiedAfter %v", id, l.Lapse, l.SatisfiedAfter)
			}
			if msg, ok := m.msgIDs[id]; ok && msg != r.Delivery.MessageID {
				rt.Fatalf("lapsed %q: message id moved from %s to %s", id, msg, r.Delivery.MessageID)
			}
			m.msgIDs[id] = r.Delivery.MessageID
			if r.SatisfiedBy != nil && !r.Late {
				rt.Fatalf("lapsed %q satisfied afterwards but not late", id)
			}
		default:
			rt.Fatalf("%q: state %q", id, r.State)
		}
		if r.SatisfiedBy != nil {
			if r.SatisfiedBy.FactKey != e.SatisfiedBy.FactKey || r.SatisfiedBy.Subject == nil || *r.SatisfiedBy.Subject != e.Subject {
				rt.Fatalf("%q (key %q, subject %v) satisfied by %s", id, e.SatisfiedBy.FactKey, e.Subject, propJSON(r.SatisfiedBy))
			}
		}
		// Instants.
		ins := Instants(r)
		if r.State != StateOpen {
			if len(ins) != 0 {
				rt.Fatalf("closed %q has instants %v", id, ins)
			}
			continue
		}
		if len(ins) == 0 || len(ins) > 3 {
			rt.Fatalf("open %q has %d instants", id, len(ins))
		}
		zeroGrace := e.Grace == "" || r.GraceEnd().Equal(mustTime(r.DueAt))
		if zeroGrace && e.Horizon == "" && len(ins) != 1 {
			rt.Fatalf("%q with zero grace and no horizon has instants %v", id, ins)
		}
		kinds := map[InstantKind]bool{}
		earliest := ins[0].At
		for _, in := range ins {
			if kinds[in.Kind] || in.ExpectationID != id || in.AgentID != r.AgentID {
				rt.Fatalf("%q: instants %v", id, ins)
			}
			kinds[in.Kind] = true
			if in.At.Before(earliest) {
				earliest = in.At
			}
		}
		if !kinds[InstantGrace] {
			rt.Fatalf("open %q has no grace-end instant: %v", id, ins)
		}
		// A tick earlier than every instant changes nothing.
		if out, changed := Tick(r, m.sub(e.Subject), earliest.Add(-time.Nanosecond)); changed || !propEq(out, r) {
			rt.Fatalf("a tick of %q before its first instant %s changed it:\n%s\n%s", id, FormatTime(earliest), propJSON(r), propJSON(out))
		}
	}
	if len(m.recs) != len(m.order) {
		rt.Fatalf("%d records but %d ids", len(m.recs), len(m.order))
	}
	m.prev = m.snapshot()
	m.prevSubs = m.subSnapshot()
}

func TestPropertyMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.MaxLineage = rapid.IntRange(1, 3).Draw(rt, "maxLineage")
		m := &propModel{
			cfg: cfg,
			card: Card{AgentID: "agent-1", Declaration: Declaration{LapseSkill: "handle-lapse", Kinds: []Kind{
				{Kind: "payment", SubjectType: "invoice", Describes: "An invoice is paid", Basis: "contract"},
			}}, Skills: []string{"handle-lapse"}},
			now:    propStart,
			recs:   map[string]*Record{},
			subs:   map[Subject]*SubjectRecord{},
			body:   map[string]Expectation{},
			fixed:  map[string][4]any{},
			msgIDs: map[string]string{},
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": m.check,
			"raise": func(rt *rapid.T) {
				n := rapid.IntRange(1, 3).Draw(rt, "batch")
				var batch []Expectation
				pool := propIDs()
				for range n {
					mode := rapid.IntRange(0, 9).Draw(rt, "idMode")
					switch {
					case mode <= 1 && len(m.order) > 0: // retry, same body
						id := rapid.SampledFrom(m.order).Draw(rt, "retryID")
						batch = append(batch, m.recs[id].Clone().Expectation)
					case mode == 2 && len(m.order) > 0: // reuse, another body
						id := rapid.SampledFrom(m.order).Draw(rt, "reuseID")
						e := m.recs[id].Clone().Expectation
						switch rapid.IntRange(0, 2).Draw(rt, "reuseChange") {
						case 0:
							e.Expects += " (changed)"
						case 1:
							e.DueAt = FormatTime(mustTime(e.DueAt).Add(time.Minute))
						default:
							e.Grace = "PT7M"
						}
						batch = append(batch, e)
					case mode <= 7 && len(m.unusedIDs()) > 0:
						id := rapid.SampledFrom(m.unusedIDs()).Draw(rt, "newID")
						batch = append(batch, m.genExpectation(rt, id, batch))
					default:
						id := rapid.SampledFrom(pool).Draw(rt, "id")
						batch = append(batch, m.genExpectation(rt, id, batch))
					}
				}
				m.applyRaise(rt, RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: batch})
			},
			"supersede": func(rt *rapid.T) {
				unused := m.unusedIDs()
				if len(m.order) == 0 || len(unused) == 0 {
					rt.Skip("nothing to supersede")
				}
				open := m.ids(func(r *Record) bool { return r.State == StateOpen })
				target := ""
				if len(open) > 0 && rapid.IntRange(0, 5).Draw(rt, "supersedeClosed") != 0 {
					target = rapid.SampledFrom(open).Draw(rt, "target")
				} else {
					target = rapid.SampledFrom(m.order).Draw(rt, "target")
				}
				old := m.recs[target]
				e := old.Clone().Expectation
				e.ExpectationID = rapid.SampledFrom(unused).Draw(rt, "newID")
				e.Expects = "expects " + e.ExpectationID
				e.DueAt = FormatTime(propTime(rt, m.now, -60, 600, "due"))
				e.Anchor, e.After, e.Supersedes = nil, nil, target
				_, err := m.applyRaise(rt, RaiseRequest{TaskID: "task-2", ContextID: "ctx-2", Expectations: []Expectation{e}})
				switch {
				case old.State != StateOpen || old.Lineage+1 > m.cfg.MaxLineage:
					if !errs.Is(err, errs.Invalid) {
						rt.Fatalf("superseding %q (%s, lineage %d, bound %d) must be Invalid, got %v", target, old.State, old.Lineage, m.cfg.MaxLineage, err)
					}
				case err != nil:
					rt.Fatalf("superseding open %q failed: %v", target, err)
				case m.recs[e.ExpectationID].Lineage != old.Lineage+1 || m.recs[target].State != StateWithdrawn:
					rt.Fatalf("supersede: new lineage %d (old %d), old now %s", m.recs[e.ExpectationID].Lineage, old.Lineage, m.recs[target].State)
				}
			},
			"fact": func(rt *rapid.T) {
				live := m.ids(func(r *Record) bool { return r.State == StateOpen || r.State == StateLapsed && r.SatisfiedBy == nil })
				if len(live) > 0 && rapid.IntRange(0, 2).Draw(rt, "targeted") == 0 {
					// The exact key of a record that can still be satisfied,
					// with its subject or none.
					e := m.recs[rapid.SampledFrom(live).Draw(rt, "target")].Expectation
					var subj *Subject
					if rapid.Bool().Draw(rt, "withSubject") {
						subj = &e.Subject
					}
					m.factAction(rt, Fact{FactKey: e.SatisfiedBy.FactKey, ObservedAt: m.drawFactTime(rt), Source: "agent-1", Subject: subj})
					return
				}
				var key string
				switch mode := rapid.IntRange(0, 4).Draw(rt, "keyMode"); {
				case mode <= 1 && len(m.order) > 0:
					key = m.recs[rapid.SampledFrom(m.order).Draw(rt, "keyOf")].Expectation.SatisfiedBy.FactKey
				case mode == 2:
					key = propNearKey(rapid.SampledFrom(propKeys).Draw(rt, "nearKey"), rapid.IntRange(0, 4).Draw(rt, "nearHow"))
				default:
					key = rapid.SampledFrom(propKeys).Draw(rt, "key")
				}
				var subj *Subject
				switch mode := rapid.IntRange(0, 5).Draw(rt, "subjectMode"); {
				case mode <= 1:
				case mode == 2:
					s := rapid.SampledFrom(propNearSubjects).Draw(rt, "nearSubject")
					subj = &s
				case mode == 3 && len(m.order) > 0:
					s := m.recs[rapid.SampledFrom(m.order).Draw(rt, "subjectOf")].Expectation.Subject
					subj = &s
				default:
					s := rapid.SampledFrom(propSubjects).Draw(rt, "subject")
					subj = &s
				}
				m.factAction(rt, Fact{FactKey: key, ObservedAt: m.drawFactTime(rt), Source: "agent-1", Subject: subj})
			},
			// Satisfy an anchor (its dependents re-anchor) or a record that
			// comes after others (its open predecessors lapse skipped).
			"satisfyLinked": func(rt *rapid.T) {
				var anchors []string
				for _, id := range m.order {
					e := m.recs[id].Expectation
					if a := e.Anchor; a != nil && m.recs[a.ExpectationID] != nil && !slices.Contains(anchors, a.ExpectationID) {
						anchors = append(anchors, a.ExpectationID)
					}
					if len(e.After) > 0 && !slices.Contains(anchors, id) {
						anchors = append(anchors, id)
					}
				}
				if len(anchors) == 0 {
					rt.Skip("no anchors")
				}
				a := m.recs[rapid.SampledFrom(anchors).Draw(rt, "anchorID")]
				s := a.Expectation.Subject
				m.factAction(rt, Fact{FactKey: a.Expectation.SatisfiedBy.FactKey, ObservedAt: m.drawFactTime(rt), Source: "agent-1", Subject: &s})
			},
			"withdraw": func(rt *rapid.T) {
				id := rapid.SampledFrom(append(propIDs(), propUnknownIDs...)).Draw(rt, "withdrawID")
				r := m.recs[id]
				if r == nil {
					rt.Logf("withdraw %q: not found", id)
					return
				}
				rj := propCopy(r)
				out, changed, err := Withdraw(r, "no longer needed", m.now)
				rt.Logf("withdraw %q (%s) at %s -> changed=%v err=%v", id, r.State, FormatTime(m.now), changed, err)
				m.checkChanged(rt, "Withdraw", rj, r, out, changed)
				switch r.State {
				case StateOpen:
					if err != nil || !changed || out.State != StateWithdrawn || out.WithdrawnAt != FormatTime(m.now) {
						rt.Fatalf("withdrawing open %q: %v %s", id, err, propJSON(out))
					}
				case StateWithdrawn:
					if err != nil || changed {
						rt.Fatalf("withdrawing withdrawn %q again: changed=%v err=%v", id, changed, err)
					}
				default:
					if !errs.Is(err, errs.Conflict) || changed {
						rt.Fatalf("withdrawing %s %q: changed=%v err=%v, want Conflict", r.State, id, changed, err)
					}
				}
				if err == nil {
					m.recs[id] = out
				}
				propStats["withdraw: "+string(r.State)]++
			},
			"tick": m.tick,
		})
	})
	keys := make([]string, 0, len(propStats))
	for k := range propStats {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("%-36s %d", k, propStats[k])
	}
}
