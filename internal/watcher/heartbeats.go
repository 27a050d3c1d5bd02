package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
	"github.com/agentclock/clockwork/internal/store"
)

// TypeHeartbeat is the item type of heartbeat records.
const TypeHeartbeat = "heartbeat"

// HeartbeatKey is the key of an agent's heartbeat name.
func HeartbeatKey(agent, name string) store.Key {
	return store.Key{PK: agentPK(agent), SK: "HB#" + esc(name)}
}

// DeletedHeartbeatKey is the key of what is left of a deleted heartbeat:
// its period count, so that one put again under the name never reuses a
// period id. (Apart from HB#, so listings never page over it.)
func DeletedHeartbeatKey(agent, name string) store.Key {
	return store.Key{PK: agentPK(agent), SK: "HBD#" + esc(name)}
}

func heartbeatItem(hb *heartbeat.Heartbeat) (store.Item, error) {
	data, err := json.Marshal(hb)
	if err != nil {
		return store.Item{}, err
	}
	key := HeartbeatKey(hb.AgentID, hb.Name)
	if hb.Deleted {
		key = DeletedHeartbeatKey(hb.AgentID, hb.Name)
	}
	return store.Item{Key: key, Type: TypeHeartbeat, Data: data}, nil
}

// errPeriodRaced is returned inside a heartbeat change when the period it
// would raise exists already: a concurrent ping raised it after this one
// read the heartbeat. The change runs again on fresh reads.
var errPeriodRaced = errors.New("a concurrent change raised the heartbeat's next period")

func decodeHeartbeat(it store.Item) (*heartbeat.Heartbeat, error) {
	var hb heartbeat.Heartbeat
	if err := json.Unmarshal(it.Data, &hb); err != nil {
		return nil, fmt.Errorf("decode heartbeat %s: %w", it.Key, err)
	}
	hb.Version = it.Version
	return &hb, nil
}

func errNoHeartbeat(agentID, name string) error {
	return errs.E(errs.NotFound, "agent %q has no heartbeat %q", agentID, name)
}

// heartbeat reads a heartbeat in the transaction (nil when there is none)
// and its current period (nil when none).
func (st *txState) heartbeat(name string) (*heartbeat.Heartbeat, *expect.Record, error) {
	return st.heartbeatAt(HeartbeatKey(st.agent, name))
}

func (st *txState) heartbeatAt(key store.Key) (*heartbeat.Heartbeat, *expect.Record, error) {
	it, ok, err := st.tx.Get(st.ctx, key)
	if err != nil || !ok {
		return nil, nil, err
	}
	hb, err := decodeHeartbeat(it)
	if err != nil || hb.Current == "" {
		return hb, nil, err
	}
	cur, err := st.record(hb.Current)
	return hb, cur, err
}

// PutHeartbeat creates or replaces heartbeat name of agentID and reports
// whether it was created. A new heartbeat is "new" until its first ping
// (which raises its first period); a replaced one keeps its open period,
// whose due time does not move. Errors: NotFound without a card; Invalid
// naming each failing field.
func (s *Service) PutHeartbeat(ctx context.Context, agentID, name string, spec heartbeat.Spec) (heartbeat.View, bool, error) {
	card, err := s.Card(ctx, agentID)
	if err != nil {
		return heartbeat.View{}, false, err
	}
	var view heartbeat.View
	created := false
	err = s.update(ctx, agentID, func(st *txState) error {
		old, cur, err := st.heartbeat(name)
		if err != nil {
			return err
		}
		if old == nil {
			// Deleted before: its period count carries on.
			if old, _, err = st.heartbeatAt(DeletedHeartbeatKey(agentID, name)); err != nil {
				return err
			}
			if old != nil {
				st.tx.Delete(DeletedHeartbeatKey(agentID, name))
			}
		}
		created = old == nil || old.Deleted
		if old != nil && old.Same(spec, card) {
			view = heartbeat.Describe(old, cur, st.now)
			return nil
		}
		hb, err := heartbeat.Put(old, card, agentID, name, spec, st.now)
		if err != nil {
			return err
		}
		if old != nil && old.Deleted {
			cur = nil
		}
		view = heartbeat.Describe(hb, cur, st.now)
		return s.applyHeartbeat(st, card, heartbeat.Change{Heartbeat: hb})
	})
	if err != nil {
		return heartbeat.View{}, false, internal(err)
	}
	return view, created, nil
}

// GetHeartbeat returns the view of one heartbeat. Errors: NotFound.
func (s *Service) GetHeartbeat(ctx context.Context, agentID, name string) (heartbeat.View, error) {
	it, err := s.store.Get(ctx, HeartbeatKey(agentID, name))
	if errors.Is(err, store.ErrNotFound) {
		return heartbeat.View{}, errNoHeartbeat(agentID, name)
	}
	if err != nil {
		return heartbeat.View{}, internal(err)
	}
	hb, err := decodeHeartbeat(it)
	if err != nil {
		return heartbeat.View{}, internal(err)
	}
	if hb.Deleted {
		return heartbeat.View{}, errNoHeartbeat(agentID, name)
	}
	return s.describe(ctx, hb)
}

func (s *Service) describe(ctx context.Context, hb *heartbeat.Heartbeat) (heartbeat.View, error) {
	var cur *expect.Record
	if hb.Current != "" {
		r, err := s.Get(ctx, hb.AgentID, hb.Current)
		switch {
		case errs.Is(err, errs.NotFound):
			// expired (retention): the heartbeat has no current period
		case err != nil:
			return heartbeat.View{}, err
		default:
			cur = r
		}
	}
	return heartbeat.Describe(hb, cur, s.now()), nil
}

// ListHeartbeats returns one page of an agent's heartbeats, by name.
// Errors: Invalid for a bad limit or token.
func (s *Service) ListHeartbeats(ctx context.Context, agentID string, limit int, nextToken string) ([]heartbeat.View, string, error) {
	if limit < 0 || limit > MaxPageSize {
		return nil, "", errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d (0 or none: 100)", MaxPageSize)}})
	}
	if limit == 0 {
		limit = 100
	}
	p, err := s.store.Query(ctx, store.Query{PK: agentPK(agentID), SKPrefix: "HB#", Limit: limit, After: nextToken})
	if errors.Is(err, store.ErrInvalid) {
		return nil, "", errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return nil, "", internal(err)
	}
	out := []heartbeat.View{}
	for _, it := range p.Items {
		hb, err := decodeHeartbeat(it)
		if err != nil {
			return nil, "", internal(err)
		}
		if hb.Deleted {
			continue
		}
		v, err := s.describe(ctx, hb)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v)
	}
	return out, p.Next, nil
}

// PingHeartbeat applies a ping's signal (heartbeat.Ping) from source, the
// authenticated caller, and returns the heartbeat as it now is. The
// period it satisfies or refutes, the next period and the heartbeat
// commit together. Errors: NotFound for no such heartbeat (or card).
func (s *Service) PingHeartbeat(ctx context.Context, agentID, name, source string, sig heartbeat.Signal) (heartbeat.View, error) {
	return s.changeHeartbeat(ctx, agentID, name, func(hb *heartbeat.Heartbeat, cur *expect.Record, now time.Time) (heartbeat.Change, error) {
		return heartbeat.Ping(hb, cur, sig, source, now, s.cfg)
	})
}

// PauseHeartbeat pauses a heartbeat (its open period is withdrawn);
// ResumeHeartbeat raises a period again. Errors: NotFound.
func (s *Service) PauseHeartbeat(ctx context.Context, agentID, name string) (heartbeat.View, error) {
	return s.changeHeartbeat(ctx, agentID, name, func(hb *heartbeat.Heartbeat, cur *expect.Record, now time.Time) (heartbeat.Change, error) {
		return heartbeat.Pause(hb, cur, now), nil
	})
}

// ResumeHeartbeat makes a paused heartbeat expect pings again. Errors:
// NotFound.
func (s *Service) ResumeHeartbeat(ctx context.Context, agentID, name string) (heartbeat.View, error) {
	return s.changeHeartbeat(ctx, agentID, name, func(hb *heartbeat.Heartbeat, _ *expect.Record, now time.Time) (heartbeat.Change, error) {
		return heartbeat.Resume(hb, now), nil
	})
}

// DeleteHeartbeat deletes a heartbeat and withdraws its open period; its
// past periods stay as they are. Errors: NotFound.
func (s *Service) DeleteHeartbeat(ctx context.Context, agentID, name string) error {
	_, err := s.changeHeartbeat(ctx, agentID, name, func(hb *heartbeat.Heartbeat, cur *expect.Record, now time.Time) (heartbeat.Change, error) {
		return heartbeat.Delete(hb, cur, now), nil
	})
	return err
}

// changeHeartbeat runs one heartbeat operation as a read-modify-write of
// the heartbeat, its current period and what the operation raises.
func (s *Service) changeHeartbeat(ctx context.Context, agentID, name string, op func(*heartbeat.Heartbeat, *expect.Record, time.Time) (heartbeat.Change, error)) (heartbeat.View, error) {
	return s.changeHeartbeatAttempt(ctx, agentID, name, op, 0)
}

func (s *Service) changeHeartbeatAttempt(ctx context.Context, agentID, name string, op func(*heartbeat.Heartbeat, *expect.Record, time.Time) (heartbeat.Change, error), attempt int) (heartbeat.View, error) {
	card, err := s.Card(ctx, agentID)
	if err != nil {
		return heartbeat.View{}, err
	}
	var view heartbeat.View
	err = s.update(ctx, agentID, func(st *txState) error {
		hb, cur, err := st.heartbeat(name)
		if err != nil {
			return err
		}
		if hb == nil || hb.Deleted {
			return errNoHeartbeat(agentID, name)
		}
		ch, err := op(hb, cur, st.now)
		if err != nil {
			return err
		}
		if ch.Heartbeat == nil {
			view = heartbeat.Describe(hb, cur, st.now)
			return nil
		}
		if err := s.applyHeartbeat(st, card, ch); err != nil {
			return err
		}
		var now *expect.Record
		if ch.Heartbeat.Current != "" {
			now = st.records[ch.Heartbeat.Current]
		}
		view = heartbeat.Describe(ch.Heartbeat, now, st.now)
		return nil
	})
	if errors.Is(err, errPeriodRaced) && attempt < 32 {
		// A concurrent ping committed between this one's reads: run again.
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		return s.changeHeartbeatAttempt(ctx, agentID, name, op, attempt+1)
	}
	if err != nil {
		return heartbeat.View{}, internal(err)
	}
	return view, nil
}

// applyHeartbeat stages a heartbeat change: the withdrawal, the periods
// raised (a superseded one withdrawn with them), the fact on its period
// (satisfying or refuting it, and counting as activity on its subject),
// and the heartbeat's record.
func (s *Service) applyHeartbeat(st *txState, card expect.Card, ch heartbeat.Change) error {
	now := st.now
	hb := ch.Heartbeat
	if ch.Withdraw != "" {
		r, err := st.record(ch.Withdraw)
		if err != nil {
			return err
		}
		if r != nil && r.State == expect.StateOpen {
			w, _, err := expect.Withdraw(r, ch.WithdrawReason, now)
			if err != nil {
				return err
			}
			st.set(w)
		}
	}
	if len(ch.Raise) > 0 {
		if _, ok := card.Kind(hb.Kind); !ok {
			return errs.E(errs.Conflict, "heartbeat %q's kind %q is no longer declared on the agent card: PUT the heartbeat again with a kind the card declares", hb.Name, hb.Kind)
		}
		req := hb.RaiseRequest(card, ch.Raise...)
		existing := map[string]*expect.Record{}
		for _, id := range req.References() {
			r, err := st.record(id)
			if err != nil {
				return err
			}
			if r != nil {
				existing[id] = r
			}
		}
		for _, e := range ch.Raise {
			if existing[e.ExpectationID] != nil {
				return errPeriodRaced
			}
		}
		res, err := expect.Raise(card, req, existing, nil, now, s.cfg)
		if err != nil {
			return err
		}
		for _, r := range res.Writes {
			st.set(r)
		}
	}
	if f := ch.Fact; f != nil {
		r, err := st.record(ch.FactOn)
		if err != nil {
			return err
		}
		if r != nil {
			sub, err := st.subject(r.Expectation.Subject)
			if err != nil {
				return err
			}
			changed := false
			switch {
			case expect.Matches(*f, r):
				nr, _ := expect.Satisfy(r, *f, now)
				st.set(nr)
				changed = true
			case expect.Refutes(*f, r):
				nr, _ := expect.Refute(r, *f, sub, now)
				st.set(nr)
				changed = true
			}
			if nsr, ok := expect.ObserveFact(sub, *f, changed, now); ok {
				st.setSubject(nsr)
			}
		}
	}
	it, err := heartbeatItem(hb)
	if err != nil {
		return err
	}
	if hb.Deleted {
		// Gone from its key; its period count is kept apart (read first,
		// so that the put is a compare-and-set on what is there).
		if _, _, err := st.tx.Get(st.ctx, it.Key); err != nil {
			return err
		}
		st.tx.Delete(HeartbeatKey(hb.AgentID, hb.Name))
	}
	st.tx.Put(it)
	return st.stage()
}
