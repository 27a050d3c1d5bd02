package watcher

import (
	"context"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// txState caches the records one transaction has read or changed, so that
// every rule sees the latest version of each record.
type txState struct {
	ctx     context.Context
	tx      *store.Tx
	agent   string
	records map[string]*expect.Record
	// orig holds each record as first read (nil: there was none), to
	// count the transitions of the commit; origData its stored JSON, to
	// tell the effects the commit calls for (package effects).
	orig     map[string]*expect.Record
	origData map[string][]byte
	store    store.Store
	// mark stages effect markers (Service.MarkEffects).
	mark     bool
	subjects map[expect.Subject]*expect.SubjectRecord
	dirty    []string
	dirtySub []expect.Subject
	// facts holds the memories of the facts this commit accepted (written
	// aside: store.Tx.PutAside), by their item key; factKeep is how long
	// one is kept.
	facts      map[store.Key]*expect.FactMemory
	dirtyFacts []store.Key
	factKeep   time.Duration
	// now and retain stamp the expiry of what the commit makes final.
	now    time.Time
	retain time.Duration
}

func newTxState(ctx context.Context, s store.Store, tx *store.Tx, agent string, now time.Time, retain time.Duration) *txState {
	return &txState{ctx: ctx, store: s, tx: tx, agent: agent, records: map[string]*expect.Record{}, orig: map[string]*expect.Record{}, origData: map[string][]byte{},
		subjects: map[expect.Subject]*expect.SubjectRecord{}, facts: map[store.Key]*expect.FactMemory{}, now: now, retain: retain}
}

// record returns the record with id, or nil when there is none.
func (st *txState) record(id string) (*expect.Record, error) {
	if r, ok := st.records[id]; ok {
		return r, nil
	}
	it, ok, err := st.tx.Get(st.ctx, ExpectationKey(st.agent, id))
	if err != nil || !ok {
		st.records[id] = nil
		return nil, err
	}
	r, err := DecodeRecord(it)
	if err != nil {
		return nil, err
	}
	st.records[id], st.orig[id], st.origData[id] = r, r, it.Data
	return r, nil
}

// adopt takes a record read by a query, unless a newer one is cached.
func (st *txState) adopt(it store.Item) (*expect.Record, error) {
	r, err := DecodeRecord(it)
	if err != nil {
		return nil, err
	}
	id := r.Expectation.ExpectationID
	if cached, ok := st.records[id]; ok && cached != nil {
		return cached, nil
	}
	st.tx.Track(it)
	st.records[id], st.orig[id], st.origData[id] = r, r, it.Data
	return r, nil
}

func (st *txState) set(r *expect.Record) {
	id := r.Expectation.ExpectationID
	st.records[id] = r
	if !slices.Contains(st.dirty, id) {
		st.dirty = append(st.dirty, id)
	}
}

func (st *txState) subject(sub expect.Subject) (*expect.SubjectRecord, error) {
	if r, ok := st.subjects[sub]; ok {
		return r, nil
	}
	it, ok, err := st.tx.Get(st.ctx, SubjectKey(st.agent, sub))
	if err != nil {
		return nil, err
	}
	if !ok {
		r := &expect.SubjectRecord{AgentID: st.agent, Subject: sub}
		st.subjects[sub] = r
		return r, nil
	}
	r, err := decodeSubject(it)
	if err != nil {
		return nil, err
	}
	st.subjects[sub] = r
	return r, nil
}

func (st *txState) setSubject(r *expect.SubjectRecord) {
	st.subjects[r.Subject] = r
	if !slices.Contains(st.dirtySub, r.Subject) {
		st.dirtySub = append(st.dirtySub, r.Subject)
	}
}

// recall reads the memories a lookback names: the latest fact with its
// key on its subject, and the latest naming no subject.
func (st *txState) recall(lb expect.Lookback) ([]*expect.FactMemory, error) {
	var out []*expect.FactMemory
	for _, sub := range []*expect.Subject{&lb.Subject, nil} {
		it, ok, err := st.tx.Get(st.ctx, FactMemoryKey(st.agent, lb.Key, sub))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		m, err := decodeFactMemory(it)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// remember records fact f (attributed) as accepted at now, for lookback;
// nothing when lookback is off.
func (st *txState) remember(f expect.Fact, now time.Time) {
	if st.factKeep <= 0 {
		return
	}
	m := expect.Remember(st.agent, f, now)
	k := FactMemoryKey(st.agent, f.FactKey, f.Subject)
	st.facts[k] = m
	if !slices.Contains(st.dirtyFacts, k) {
		st.dirtyFacts = append(st.dirtyFacts, k)
	}
}

// deferFactMemories leaves out of the commit the fact memories that do
// not fit beside its records and subjects (store.MaxCommitWrites, with
// room for their markers), and returns the facts whose memory is to be
// written after it (Service.rememberFacts).
func (st *txState) deferFactMemories() []expect.Fact {
	room := store.MaxCommitWrites - (st.writes() - len(st.dirtyFacts))
	if len(st.dirtyFacts) <= room {
		return nil
	}
	keep := max(room, 0)
	var out []expect.Fact
	for _, k := range st.dirtyFacts[keep:] {
		out = append(out, st.facts[k].Fact)
	}
	st.dirtyFacts = st.dirtyFacts[:keep]
	return out
}

// writes returns how many records and subjects staging would write (their
// lookup entries aside, which store.Update fits around them), and, with
// effect markers, one for each record (the room its marker may take), so
// that the commits that bound themselves by it leave that room.
func (st *txState) writes() int {
	n := len(st.dirty) + len(st.dirtySub) + len(st.dirtyFacts)
	if st.mark {
		n += len(st.dirty)
	}
	return n
}

// stage puts every changed record and subject into the transaction, with
// the marker of each record change whose effects must not be lost
// (package effects: its alerts, the re-anchoring of its dependents).
func (st *txState) stage() error {
	// Markers take what room the commit has left (store.MaxCommitWrites):
	// the commits that bound themselves by writes() leave it, and one that
	// cannot be split (a fact matching many lapsed expectations) is not
	// refused for them; a change whose marker did not fit relies on its
	// stream record alone, as every change did before markers.
	room := store.MaxCommitWrites - st.writes()
	for _, id := range st.dirty {
		r := st.records[id]
		expect.StampExpiry(r, st.now, st.retain)
		it, err := recordItem(r)
		if err != nil {
			return err
		}
		st.tx.Put(it)
		if st.mark && room > 0 {
			marked, err := st.markEffects(id, it)
			if err != nil {
				return err
			}
			if marked {
				room--
			}
		}
	}
	for _, sub := range st.dirtySub {
		it, err := subjectItem(st.subjects[sub], st.retain)
		if err != nil {
			return err
		}
		st.tx.Put(it)
	}
	// A fact's memory is derived data the latest report may replace: it
	// is written aside (on DynamoDB a plain put before the transaction,
	// not a transactional write at twice the cost).
	for _, key := range st.dirtyFacts {
		it, err := factMemoryItem(st.facts[key], st.factKeep)
		if err != nil {
			return err
		}
		st.tx.PutAside(it)
	}
	return nil
}

// markEffects stages the marker of the change of record id to it, when it
// calls for effects, and reports whether it did: the version the commit
// writes is the one read plus one (1 for a record it creates).
func (st *txState) markEffects(id string, it store.Item) (bool, error) {
	kinds := effects.Of(TypeExpectation, st.origData[id], it.Data)
	orig, r := st.orig[id], st.records[id]
	if r.SatisfiedBy != nil && (orig == nil || orig.SatisfiedBy == nil) {
		deps, err := st.hasDependents(id)
		if err != nil {
			return false, err
		}
		if deps {
			kinds = effects.With(kinds, effects.Reanchor)
		}
	}
	version := int64(1)
	if orig != nil {
		version = orig.Version + 1
	}
	return len(kinds) > 0, effects.Stage(st.tx, it.Key, version, st.now, kinds)
}

// hasDependents reports whether an expectation is anchored on record id
// (one entry of the anchor lookup is enough).
func (st *txState) hasDependents(id string) (bool, error) {
	p, err := st.store.Query(st.ctx, store.Query{PK: anchorPK(st.agent, id), Limit: 1})
	if err != nil {
		return false, err
	}
	for _, e := range p.Items {
		if e.Type == store.TypeLookupEntry {
			return true, nil
		}
	}
	return false, nil
}

// lookup reads the records with key pk in lookup indexes (that share its
// partition), consistently (every commit before it is seen), each
// tracked for a compare-and-set.
func (st *txState) lookup(pk string, names ...store.IndexName) ([]*expect.Record, error) {
	items, err := st.tx.LookupIn(st.ctx, pk, names...)
	if err != nil {
		return nil, err
	}
	out := make([]*expect.Record, 0, len(items))
	for _, it := range items {
		r, err := st.adopt(it)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// update runs fn in one read-modify-write of agent's records (store.Update:
// fn may run again on a conflict) and, once the commit has succeeded,
// counts the transitions that commit made.
func (s *Service) update(ctx context.Context, agent string, fn func(st *txState) error) error {
	var last *txState
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		last = newTxState(ctx, s.store, tx, agent, s.now(), s.cfg.Retain)
		last.mark = s.markEffects
		last.factKeep = s.cfg.FactLookbackMax
		return fn(last)
	})
	if err == nil && last != nil {
		s.count(last, s.now())
	}
	return err
}

// count records the transitions of a committed transaction: each changed
// record against the record as first read.
func (s *Service) count(st *txState, committed time.Time) {
	for _, id := range st.dirty {
		old, nr := st.orig[id], st.records[id]
		if nr == nil {
			continue
		}
		if old == nil {
			s.metrics.Record(metrics.ExpectationsRaised, 1)
		}
		if nr.SatisfiedBy != nil && (old == nil || old.SatisfiedBy == nil) {
			timing := metrics.OnTime
			if nr.Late {
				timing = metrics.Late
			}
			s.metrics.Record(metrics.ExpectationsSatisfied, 1, timing)
		}
		if nr.Lapse != nil && (old == nil || old.Lapse == nil) {
			kind := string(nr.Lapse.Lapse)
			s.metrics.Record(metrics.ExpectationsLapsed, 1, kind)
			if at, ok := lapseInstant(nr); ok {
				s.metrics.Record(metrics.LapseLateness, committed.Sub(at).Seconds(), kind)
			}
		}
		if nr.State == expect.StateWithdrawn && (old == nil || old.State != expect.StateWithdrawn) {
			s.metrics.Record(metrics.ExpectationsWithdrawn, 1)
		}
	}
}

// lapseInstant returns the instant that decided a lapse: the grace end of
// an overdue one, the horizon of a stalled one. A skipped lapse has none
// (it is decided by another expectation's satisfaction).
func lapseInstant(r *expect.Record) (time.Time, bool) {
	switch r.Lapse.Lapse {
	case expect.Overdue:
		return r.GraceEnd(), true
	case expect.Stalled:
		t, err := expect.ParseTime(r.Expectation.Horizon)
		return t, err == nil
	}
	return time.Time{}, false
}
