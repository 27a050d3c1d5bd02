package expect

// The property test's model of the watcher's rules: raises, facts and
// ticks applied to plain records, to compare with the machine's.

import (
	"fmt"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"pgregory.net/rapid"
)

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
	res, err := Raise(m.card, req, existing, nil, m.now, m.cfg)
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
