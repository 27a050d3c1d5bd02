package notify

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store"
)

// TypePassRate and TypePassRateSeen are a pass-rate rule's state for one
// agent (alert.PassRateWindow) and the mark of a VERIFY it counted.
const (
	TypePassRate     = "alertpassrate"
	TypePassRateSeen = "alertpassrateseen"
)

func passRateKey(agent, rule string) store.Key {
	return store.Key{PK: "A#" + esc(agent), SK: "ALERTPR#" + esc(rule)}
}

func passRateSeenKey(agent, rule, vid string) store.Key {
	return store.Key{PK: "A#" + esc(agent), SK: "ALERTPRV#" + esc(rule) + "#" + esc(vid)}
}

// passRate counts a completed VERIFY in a pass-rate rule's window and
// makes the notifications of the change it calls for (the rate fell under
// the threshold, or is back). Counting is once per VERIFY (a mark, in the
// same commit, outlives the window), so a replayed change counts nothing
// twice; the change to notify is kept in the window's state until its
// notifications are made, so a crash between the two makes them on the
// replay. Errors are the store's.
func (s *Service) passRate(ctx context.Context, agent string, byOperator bool, r alert.Rule, occ alert.Occurrence) error {
	var v anticipate.Verification
	if err := json.Unmarshal(occ.Event.Data.Verification, &v); err != nil {
		return nil // not a VERIFY this rule can read: nothing to count
	}
	counted, passed := alert.PassRateOf(r, &v)
	ruleID := r.PassRateID()
	now := s.opt.Now()
	at, err := time.Parse(time.RFC3339Nano, v.Timestamp)
	if err != nil {
		at = now
	}
	var pending *alert.Occurrence
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		pending = nil
		it, ok, err := tx.Get(ctx, passRateKey(agent, ruleID))
		if err != nil {
			return err
		}
		var w alert.PassRateWindow
		if ok {
			if err := json.Unmarshal(it.Data, &w); err != nil {
				return err
			}
		}
		_, seen, err := tx.Get(ctx, passRateSeenKey(agent, ruleID, v.VerificationID))
		if err != nil {
			return err
		}
		if seen || !counted {
			pending = w.Pending
			return nil
		}
		w.Count(r, agent, ruleID, at, now, passed)
		pending = w.Pending
		b, err := json.Marshal(w)
		if err != nil {
			return err
		}
		tx.Put(store.Item{Key: passRateKey(agent, ruleID), Type: TypePassRate, Data: b})
		// The mark outlives the window by a day: a replay comes long
		// before it expires, and a VERIFY older than the window counts
		// for nothing anyway.
		tx.Put(store.Item{Key: passRateSeenKey(agent, ruleID, v.VerificationID), Type: TypePassRateSeen, Data: []byte(`{}`),
			ExpiresAt: now.Add(r.WindowOf() + 24*time.Hour).Unix()})
		return nil
	})
	if err != nil || pending == nil {
		return err
	}
	if err := s.create(ctx, agent, byOperator, r, *pending); err != nil {
		return err
	}
	done := pending.Key
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, passRateKey(agent, ruleID))
		if err != nil || !ok {
			return err
		}
		var w alert.PassRateWindow
		if err := json.Unmarshal(it.Data, &w); err != nil {
			return err
		}
		if w.Pending == nil || w.Pending.Key != done {
			return nil
		}
		w.Pending = nil
		b, err := json.Marshal(w)
		if err != nil {
			return err
		}
		tx.Put(store.Item{Key: passRateKey(agent, ruleID), Type: TypePassRate, Data: b})
		return nil
	})
}
