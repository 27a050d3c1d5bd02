package watcher

import (
	"context"
	"errors"

	"github.com/agentclock/clockwork/internal/breaker"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// Erased counts what an erasure removed, by the item's type ("card",
// "expectation", "subject", "credentials", "notification", ...).
type Erased map[string]int

// EraseAgent removes everything the watcher and its neighbours keep under
// the agent: its card first (so nothing new can be raised for it), then
// every item of its partition: expectation records with their lookup and
// index entries (a fact then satisfies nothing; a lapse due later finds
// no record, so no lapse task is sent; on AWS the removal's change cancels
// its schedules), subject memory, task state, credentials, alert rules
// and cooldowns, notifications (with their dead letters). An erasure cut
// short is finished by the next. Errors: NotFound when there is nothing of
// the agent left (a second erasure).
func (s *Service) EraseAgent(ctx context.Context, agentID string) (Erased, error) {
	out := Erased{}
	typ, err := store.Remove(ctx, s.store, CardKey(agentID))
	if err != nil {
		return nil, internal(err)
	}
	if typ != "" {
		out[TypeCard] = 1
	}
	s.cardsMu.Lock()
	delete(s.cards, agentID)
	s.cardsMu.Unlock()
	// Every other item of the partition, a page at a time (each deleted
	// with its entries by store.Remove).
	for {
		p, err := s.store.Query(ctx, store.Query{PK: agentPK(agentID), Limit: store.MaxLimit})
		if err != nil {
			return out, internal(err)
		}
		if len(p.Items) == 0 {
			return done(out, agentID)
		}
		deleted := 0
		for _, it := range p.Items {
			typ, err := store.Remove(ctx, s.store, it.Key)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return out, internal(err)
			}
			if typ != "" {
				deleted++
				if typ != store.TypeClaim && typ != breaker.TypeCircuit { // delivery state, not the agent's data
					out[typ]++
				}
			}
		}
		if deleted == 0 {
			// What the query still shows is gone already (a table query
			// on DynamoDB may lag its deletes a moment).
			return done(out, agentID)
		}
	}
}

// done answers an erasure: NotFound when it found nothing to remove.
func done(out Erased, agentID string) (Erased, error) {
	if len(out) == 0 {
		return nil, errs.E(errs.NotFound, "nothing of agent %q is stored", agentID)
	}
	return out, nil
}
