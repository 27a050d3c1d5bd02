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
