// Package watcher is the application service of the expectations watcher:
// it loads records from the store, applies the pure state machine of
// package expect on the watcher's clock, and commits the result through the
// store's optimistic read-modify-write helper. Scheduling and lapse delivery
// happen after the commit, from the change feed (package feed).
package watcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// Service is the watcher's application service. Its zero value is not
// usable; build it with New.
type Service struct {
	store store.Store
	now   func() time.Time
	cfg   expect.Config

	// cards caches parsed cards by agent and store version: a card is
	// re-read on every request (so every process sees updates at once) but
	// parsed only when its version changes.
	cardsMu sync.RWMutex
	cards   map[string]cachedCard

	metrics metrics.Recorder
	// markEffects: see MarkEffects.
	markEffects bool
	// tasks asks watched tasks' agents about them (SetTaskReader);
	// askGate holds back the agents that failed slowly.
	tasks   TaskReader
	askGate askGate
	// askLimits overrides askTimeout and askBudget (tests).
	askLimits *[2]time.Duration
	// pushBase and subscriber subscribe to watched tasks (SetWatchPush).
	pushBase   string
	subscriber TaskSubscriber
}

type cachedCard struct {
	version int64
	card    expect.Card
}

// New returns a service over st using now as the watcher's clock.
func New(st store.Store, now func() time.Time, cfg expect.Config) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, now: func() time.Time { return now().UTC() }, cfg: cfg, cards: map[string]cachedCard{}, metrics: metrics.Nop}
}

// MarkEffects makes every commit that calls for effects the change feed
// must not lose write their marker (package effects): on AWS, whose
// stream may discard a change's record. The embedded feed loses none (it
// replays what it has not acknowledged, and retries what it set aside), so
// it saves the marker's write and clear. Call it before the service is
// used.
func (s *Service) MarkEffects(on bool) { s.markEffects = on }

// SetMetrics makes the service count the transitions it commits (raised,
// satisfied, lapsed, withdrawn, and each lapse's lateness) on m; call it
// before the service is used. nil counts nothing.
func (s *Service) SetMetrics(m metrics.Recorder) { s.metrics = metrics.Or(m) }

// Config returns the rules the service applies.
func (s *Service) Config() expect.Config { return s.cfg }

// Now returns the watcher's clock.
func (s *Service) Now() time.Time { return s.now() }

// Store returns the underlying store.
func (s *Service) Store() store.Store { return s.store }

func internal(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("watcher: %w", err)
}

// PutCard validates and stores an agent's A2A card. It returns an Invalid
// error naming the failing card fields.
func (s *Service) PutCard(ctx context.Context, agentID string, raw []byte) (expect.Card, error) {
	if msg := expect.ValidID(agentID); msg != "" {
		return expect.Card{}, errs.Fields("invalid agent id", []errs.FieldError{{Path: "agentId", Message: msg}})
	}
	card, err := expect.ParseCard(agentID, raw)
	if err != nil {
		return expect.Card{}, err
	}
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, _, err := tx.Get(ctx, CardKey(agentID))
		if err != nil {
			return err
		}
		it.Key, it.Type, it.Data = CardKey(agentID), TypeCard, card.Raw
		it.Index = cardIndex(agentID)
		tx.Put(it)
		return nil
	})
	return card, internal(err)
}

// Card returns an agent's card, or a NotFound error.
func (s *Service) Card(ctx context.Context, agentID string) (expect.Card, error) {
	it, err := s.store.Get(ctx, CardKey(agentID))
	if errors.Is(err, store.ErrNotFound) {
		return expect.Card{}, errs.E(errs.NotFound, "agent %q has no card; PUT /v1/agents/%s first", agentID, agentID)
	}
	if err != nil {
		return expect.Card{}, internal(err)
	}
	s.cardsMu.RLock()
	c, ok := s.cards[agentID]
	s.cardsMu.RUnlock()
	if ok && c.version == it.Version {
		return c.card, nil
	}
	card, err := expect.ParseCard(agentID, it.Data)
	if err != nil {
		return expect.Card{}, fmt.Errorf("stored card of %q no longer parses: %w", agentID, err)
	}
	s.cardsMu.Lock()
	if len(s.cards) > 10000 {
		clear(s.cards)
	}
	s.cards[agentID] = cachedCard{version: it.Version, card: card}
	s.cardsMu.Unlock()
	return card, nil
}

// Raise raises the expectations of req for agentID, all or nothing. It
// returns one record per requested expectation. Errors: NotFound when the
// agent has no card; Invalid naming every failing field; Conflict when an id
// was already raised with another body, or when the origin task was
// canceled (a retry of a raise made before changes nothing and is answered
// as before).
func (s *Service) Raise(ctx context.Context, agentID string, req expect.RaiseRequest) ([]*expect.Record, error) {
	card, err := s.Card(ctx, agentID)
	if err != nil {
		return nil, err
	}
	return s.raise(ctx, agentID, card, req)
}

// raise is Raise with the agent's card read.
func (s *Service) raise(ctx context.Context, agentID string, card expect.Card, req expect.RaiseRequest) ([]*expect.Record, error) {
	if err := s.checkWatched(ctx, req); err != nil {
		return nil, err
	}
	var out []*expect.Record
	err := s.update(ctx, agentID, func(st *txState) error {
		existing := map[string]*expect.Record{}
		for _, id := range req.References() {
			if expect.ValidID(id) != "" {
				continue // Raise names the field
			}
			r, err := st.record(id)
			if err != nil {
				return err
			}
			if r != nil {
				existing[id] = r
			}
		}
		remembered := map[string][]*expect.FactMemory{}
		if s.cfg.FactLookbackMax > 0 {
			for _, lb := range req.LookbackKeys() {
				mems, err := st.recall(lb)
				if err != nil {
					return err
				}
				remembered[lb.Key] = append(remembered[lb.Key], mems...)
			}
		}
		res, err := expect.Raise(card, req, existing, remembered, s.now(), s.cfg)
		if err != nil {
			return err
		}
		if len(res.Writes) > 0 {
			// A raise for a canceled origin task is refused. (One that
			// races the cancellation is withdrawn by the change feed:
			// WithdrawIfTaskCanceled.)
			task, err := st.readTask(req.TaskID)
			if err != nil {
				return err
			}
			if task.Canceled {
				return errTaskCanceled(req.TaskID)
			}
		}
		for _, r := range res.Writes {
			st.set(r)
		}
		out = res.Records
		// An anchor decides a dependent's due time (already satisfied: at
		// once; else when it is, by looking up its dependents), so the
		// raise commits only if each anchor is still as read: a fact
		// satisfying it meanwhile makes the raise run again, instead of
		// leaving a dependent that neither saw the fact nor was looked up.
		for _, e := range req.Expectations {
			if e.Anchor != nil && existing[e.Anchor.ExpectationID] != nil {
				st.tx.Check(ExpectationKey(agentID, e.Anchor.ExpectationID))
			}
		}
		return st.stage()
	})
	if err != nil {
		return nil, internal(err)
	}
	return out, nil
}

// checkWatched refuses a raise whose watchTask names an agent with no
// card (Invalid, naming the field): its tasks could not be asked about.
// Whether the caller may act for that agent is the edge's to check.
func (s *Service) checkWatched(ctx context.Context, req expect.RaiseRequest) error {
	var c errs.Collector
	for i, e := range req.Expectations {
		w := e.WatchTask
		if w == nil || expect.ValidID(w.AgentID) != "" {
			continue
		}
		if _, err := s.Card(ctx, w.AgentID); errs.Is(err, errs.NotFound) {
			c.Add(fmt.Sprintf("expectations[%d].watchTask.agentId", i), "names no registered agent (%q): PUT its card first", w.AgentID)
		} else if err != nil {
			return err
		}
	}
	return c.Err("invalid expectations")
}

// Get returns one expectation record, or a NotFound error.
func (s *Service) Get(ctx context.Context, agentID, id string) (*expect.Record, error) {
	it, err := s.store.Get(ctx, ExpectationKey(agentID, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.E(errs.NotFound, "agent %q has no expectation %q", agentID, id)
	}
	if err != nil {
		return nil, internal(err)
	}
	return DecodeRecord(it)
}

// ListFilter selects records to list.
type ListFilter struct {
	State       string
	SubjectType string
	SubjectID   string
	Limit       int
	NextToken   string
}

// MaxPageSize bounds one page of a listing.
const MaxPageSize = 500

// List returns one page of an agent's records. With a full subject it reads
// the subject index; otherwise it reads the agent's partition and filters.
// A bad state, limit or token is an Invalid error.
func (s *Service) List(ctx context.Context, agentID string, f ListFilter) ([]*expect.Record, string, error) {
	var c errs.Collector
	switch expect.State(f.State) {
	case "", expect.StateOpen, expect.StateSatisfied, expect.StateLapsed, expect.StateWithdrawn:
	default:
		c.Add("state", "must be one of open, satisfied, lapsed, withdrawn")
	}
	if f.Limit < 0 || f.Limit > MaxPageSize {
		c.Add("limit", "must be between 1 and %d (0 or none: 100)", MaxPageSize)
	}
	if (f.SubjectID != "") && f.SubjectType == "" {
		c.Add("subjectType", "is required with subjectId")
	}
	if err := c.Err("invalid listing"); err != nil {
		return nil, "", err
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	q := store.Query{PK: agentPK(agentID), SKPrefix: "E#", Limit: limit, After: f.NextToken}
	if f.SubjectType != "" && f.SubjectID != "" {
		// The state is not in the index key (it would move the entry at
		// every close): a page by state is filtered below.
		q = store.Query{Index: store.GSI2, PK: subjectPK(agentID, expect.Subject{Type: f.SubjectType, ID: f.SubjectID}), Limit: limit, After: f.NextToken}
	}
	p, err := s.store.Query(ctx, q)
	if errors.Is(err, store.ErrInvalid) {
		return nil, "", errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return nil, "", internal(err)
	}
	out := []*expect.Record{}
	for _, it := range p.Items {
		r, err := DecodeRecord(it)
		if err != nil {
			return nil, "", internal(err)
		}
		if f.State != "" && string(r.State) != f.State || f.SubjectType != "" && r.Expectation.Subject.Type != f.SubjectType {
			continue
		}
		out = append(out, r)
	}
	return out, p.Next, nil
}

// ReanchorDependents moves the due time of every open expectation anchored
// on anchorID to observedAt plus its offset (projectedDueAt never changes),
// together in one commit; one whose new grace end has passed lapses at
// once. It runs from the change feed when an expectation first records a
// satisfying fact, so a fact itself costs only its own writes (and, when
// dependents exist, the marker that makes the sweep redo this if the feed
// loses the change: package effects). Running it twice changes nothing
// more. It reports whether any expectation is anchored on anchorID.
func (s *Service) ReanchorDependents(ctx context.Context, agentID, anchorID string, observedAt time.Time) (bool, error) {
	found := false
	for {
		more := false
		err := s.update(ctx, agentID, func(st *txState) error {
			now := s.now()
			more = false
			deps, err := st.lookup(anchorPK(agentID, anchorID), lookupAnchor)
			if err != nil || len(deps) == 0 {
				return err
			}
			found = true
			anchor, err := st.record(anchorID)
			if err != nil || anchor == nil {
				return err
			}
			for _, d := range deps {
				if !expect.AnchoredOn(d, anchor) {
					continue // raised on an earlier expectation of that id, which expired
				}
				if st.writes() >= store.MaxCommitWrites-1 {
					more = true // the rest in the next commit
					break
				}
				sub, err := st.subject(d.Expectation.Subject)
				if err != nil {
					return err
				}
				if nd, changed := expect.Reanchor(d, observedAt, sub, now); changed {
					st.set(nd)
				}
			}
			return st.stage()
		})
		if err != nil || !more {
			return found, internal(err)
		}
	}
}

// Withdraw withdraws the open expectations named by ids, all or nothing.
// Errors: Invalid for an empty or oversized list; NotFound for an unknown
// id; Conflict for an expectation already satisfied or lapsed. Withdrawing
// an already withdrawn expectation returns it unchanged.
func (s *Service) Withdraw(ctx context.Context, agentID string, ids []string, reason string) ([]*expect.Record, error) {
	var c errs.Collector
	switch {
	case len(ids) == 0:
		c.Add("withdraw", "must name at least one expectation")
	case len(ids) > s.cfg.MaxPerRequest:
		c.Add("withdraw", "names more than %d expectations", s.cfg.MaxPerRequest)
	}
	for i, id := range ids {
		if msg := expect.ValidID(id); msg != "" {
			c.Add(fmt.Sprintf("withdraw[%d]", i), "%s", msg)
		} else if expect.IsHeartbeatID(id) {
			c.Add(fmt.Sprintf("withdraw[%d]", i), "is a heartbeat's period: pause or delete the heartbeat instead")
		} else if expect.IsReservedID(id) {
			c.Add(fmt.Sprintf("withdraw[%d]", i), "is a review item's due time, which ends when its reviews are in")
		}
	}
	if len(reason) > expect.MaxTextLen {
		c.Add("reason", "is longer than %d bytes", expect.MaxTextLen)
	}
	if err := c.Err("invalid withdrawal"); err != nil {
		return nil, err
	}
	if reason == "" {
		reason = "withdrawn by the agent"
	}
	var out []*expect.Record
	err := s.update(ctx, agentID, func(st *txState) error {
		now := s.now()
		out = out[:0]
		for _, id := range ids {
			r, err := st.record(id)
			if err != nil {
				return err
			}
			if r == nil {
				return errs.E(errs.NotFound, "agent %q has no expectation %q", agentID, id)
			}
			nr, changed, err := expect.Withdraw(r, reason, now)
			if err != nil {
				return err
			}
			if changed {
				st.set(nr)
			}
			out = append(out, nr)
		}
		return st.stage()
	})
	if err != nil {
		return nil, internal(err)
	}
	return out, nil
}

// UpdateRecord applies fn to one record in a read-modify-write with retry.
// fn returns the new record and whether to write it. A missing record is a
// NotFound error.
func (s *Service) UpdateRecord(ctx context.Context, agentID, id string, fn func(*expect.Record) (*expect.Record, bool, error)) (*expect.Record, error) {
	var out *expect.Record
	err := s.update(ctx, agentID, func(st *txState) error {
		r, err := st.record(id)
		if err != nil {
			return err
		}
		if r == nil {
			return errs.E(errs.NotFound, "agent %q has no expectation %q", agentID, id)
		}
		nr, write, err := fn(r.Clone())
		if err != nil {
			return err
		}
		out = nr
		if write {
			st.set(nr)
		}
		return st.stage()
	})
	return out, internal(err)
}

// Redeliver puts a dead-lettered (or suppressed) lapse back in the outbox
// with a fresh attempt budget; its messageId does not change. A record
// without a lapse is a Conflict; an already delivered one, and one whose
// delivery is still being attempted, are returned as they are (resetting
// the attempts of a send in flight would let a second one start beside
// it).
func (s *Service) Redeliver(ctx context.Context, agentID, id string) (*expect.Record, error) {
	return s.UpdateRecord(ctx, agentID, id, func(r *expect.Record) (*expect.Record, bool, error) {
		if r.Delivery == nil || r.Lapse == nil {
			return nil, false, errs.E(errs.Conflict, "expectation %q has not lapsed; there is nothing to deliver", id)
		}
		if r.Delivery.DeliveredAt != "" || (!r.Delivery.DeadLettered && !r.Delivery.Suppressed) {
			return r, false, nil
		}
		r.Delivery.DeadLettered, r.Delivery.Suppressed, r.Delivery.Attempts, r.Delivery.NextAttemptAt = false, false, 0, ""
		r.Delivery.SilencedBy = ""
		r.Delivery.FailingSince, r.Delivery.WaitingForProbe = "", false
		r.Delivery.Replays++
		return r, true, nil
	})
}

// Acknowledge records principal by's acknowledgement of the lapse of
// agentID's expectation id (expect.Acknowledge), with an optional note; an
// acknowledged lapse is returned as it is. Its change tells the lapse's
// alert channels (expectation.acknowledged). Errors: NotFound; Conflict
// when the expectation has not lapsed; Invalid naming "note".
func (s *Service) Acknowledge(ctx context.Context, agentID, id, by, note string) (*expect.Record, error) {
	return s.UpdateRecord(ctx, agentID, id, func(r *expect.Record) (*expect.Record, bool, error) {
		changed, err := expect.Acknowledge(r, by, note, s.now())
		return r, changed, err
	})
}

// ClaimDelivery claims the next delivery attempt of rec's lapse task for
// the duration hold (store.Claim), and reports whether this caller holds it
// and the record, read again after the claim, still awaits that attempt:
// of several processes attempting one lapse at once, one sends, and one
// that read the record before another's attempt was recorded does not
// send it again. Errors are Internal (the store's).
func (s *Service) ClaimDelivery(ctx context.Context, rec *expect.Record, hold time.Duration) (bool, error) {
	d := rec.Delivery
	if d == nil {
		return false, nil
	}
	id := rec.Expectation.ExpectationID
	ok, err := store.Claim(ctx, s.store, DeliveryClaimKey(rec.AgentID, id, d.Replays, d.Attempts), hold)
	if err != nil || !ok {
		return false, internal(err)
	}
	cur, err := s.Get(ctx, rec.AgentID, id)
	if errs.Is(err, errs.NotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return PendingDelivery(cur) && cur.Delivery.Attempts == d.Attempts && cur.Delivery.Replays == d.Replays, nil
}

// ExpectationState returns the state of one of an agent's expectations, for
// the evaluation loop's assertions; ok is false when there is none.
func (s *Service) ExpectationState(ctx context.Context, agentID, id string) (string, bool, error) {
	r, err := s.Get(ctx, agentID, id)
	if errs.Is(err, errs.NotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(r.State), true, nil
}

// LapseCount counts an agent's lapsed expectations of one lapse kind, or
// of every kind when kind is empty.
func (s *Service) LapseCount(ctx context.Context, agentID, kind string) (int, error) {
	n := 0
	q := store.Query{PK: agentPK(agentID), SKPrefix: "E#", Limit: 1000}
	for {
		p, err := s.store.Query(ctx, q)
		if err != nil {
			return 0, internal(err)
		}
		for _, it := range p.Items {
			r, err := DecodeRecord(it)
			if err != nil {
				return 0, err
			}
			if r.Lapse != nil && (kind == "" || string(r.Lapse.Lapse) == kind) {
				n++
			}
		}
		if p.Next == "" {
			return n, nil
		}
		q.After = p.Next
	}
}
