package evaluation

import (
	"context"

	"github.com/agentclock/clockwork/internal/store"
)

// EraseAgent removes the evidence of agentID: each of its ANTICIPATEs
// with the VERIFYs graded against it and the execution (events, event
// ids) of its plan, and returns how many of each it removed. It reads the
// agent's anticipation listing, which on DynamoDB may miss a declaration
// made a moment before (run it again to be sure). Errors are the store's.
func (s *Service) EraseAgent(ctx context.Context, agentID string) (map[string]int, error) {
	out := map[string]int{}
	all := func(string) bool { return true }
	for {
		page, err := s.AnticipationsOf(ctx, agentID, MaxAnticipationsPage, "", all)
		if err != nil {
			return out, err
		}
		if len(page.Anticipations) == 0 {
			return out, nil
		}
		deleted := 0
		for _, rec := range page.Anticipations {
			vs, err := s.store.Query(ctx, store.Query{Index: store.GSI1, PK: byAnticipationPK(rec.AnticipateID), Limit: store.MaxLimit})
			if err != nil {
				return out, err
			}
			for _, it := range vs.Items {
				n, err := s.deleteItem(ctx, it.Key)
				if err != nil {
					return out, err
				}
				out[TypeVerification] += n
			}
			if rec.PlanID != "" {
				for {
					p, err := s.store.Query(ctx, store.Query{PK: executionPK(agentID, rec.PlanID), Limit: store.MaxLimit})
					if err != nil {
						return out, err
					}
					n := 0
					for _, it := range p.Items {
						d, err := s.deleteItem(ctx, it.Key)
						if err != nil {
							return out, err
						}
						out[it.Type] += d
						n += d
					}
					if n == 0 {
						break
					}
				}
			}
			n, err := s.deleteItem(ctx, rec.storeKey())
			if err != nil {
				return out, err
			}
			out[TypeAnticipation] += n
			deleted += n
		}
		if deleted == 0 {
			return out, nil
		}
	}
}

// deleteItem deletes one item with its lookup entries; 1 when it was
// there.
func (s *Service) deleteItem(ctx context.Context, key store.Key) (int, error) {
	typ, err := store.Remove(ctx, s.store, key)
	if typ == "" {
		return 0, err
	}
	return 1, err
}
