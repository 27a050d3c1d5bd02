package evaluation

import (
	"context"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// loadAnticipation reads agentID's anticipation id in tx: at its key, or
// where one stored before ids were namespaced lies, when that one is
// agentID's. exists is false when there is none; both keys read are
// tracked, so a declaration of the id committing meanwhile makes the
// transaction run again.
func loadAnticipation(ctx context.Context, tx *store.Tx, agentID, id string) (rec *AnticipationRecord, exists bool, err error) {
	it, ok, err := tx.Get(ctx, anticipationKey(agentID, id))
	if err != nil || ok {
		if ok {
			rec, err = decodeAnticipation(it)
		}
		return rec, ok, err
	}
	it, ok, err = tx.Get(ctx, legacyAnticipationKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	if rec, err = decodeAnticipation(it); err != nil {
		return nil, false, err
	}
	return rec, rec.AgentID == agentID, nil
}

// anticipationAgent decides whose anticipation id a read addresses: the
// agent it names; else the caller's single agent; else the one of the
// caller's agents that declared the id; "" when none did. Errors:
// Forbidden when named is an agent the caller may not act for (whatever is
// stored); Invalid naming agent_id when several of the caller's agents
// declared the id.
func anticipationAgent(ctx context.Context, tx *store.Tx, id, named string, c Caller) (string, error) {
	return ownerFor(c, named, "anticipation", id, func(add func(string)) error {
		items, err := tx.Lookup(ctx, lookupAnticipationIDs, anticipationIDsPK(id))
		if err != nil {
			return err
		}
		if legacy, ok, err := tx.Get(ctx, legacyAnticipationKey(id)); err != nil {
			return err
		} else if ok {
			items = append(items, legacy)
		}
		for _, it := range items {
			rec, err := decodeAnticipation(it)
			if err != nil {
				return err
			}
			add(rec.AgentID)
		}
		return nil
	})
}

// readAnticipation is loadAnticipation outside a transaction of the
// caller's; NotFound when there is none.
func (s *Service) readAnticipation(ctx context.Context, agentID, id string) (*AnticipationRecord, error) {
	var rec *AnticipationRecord
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		r, ok, err := loadAnticipation(ctx, tx, agentID, id)
		if err == nil && !ok {
			err = noAnticipation(id)
		}
		rec = r
		return err
	})
	return rec, err
}

func noAnticipation(id string) error { return errs.E(errs.NotFound, "no anticipation %q", id) }
