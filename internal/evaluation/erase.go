package evaluation

import (
	"context"
	"encoding/json"

	"github.com/agentclock/clockwork/internal/store"
)

// maxErasePasses bounds EraseAgent's passes: each reads the agent's
// listings again, since a global index may show an item a moment late.
const maxErasePasses = 5

// EraseAgent removes the evidence of agentID: each of its ANTICIPATEs
// with the VERIFYs graded against it (this agent's only: anticipation ids
// are per agent, the index of VERIFYs by anticipation id is not), each
// of its executions, bound by plan or by scope envelope, with their events
// and event ids, and each evaluation that graded its plans; it returns how many items of each type it removed. It
// reads global indexes, which on DynamoDB may miss a declaration made a
// moment before (run it again to be sure), so it passes over them until a
// pass removes nothing. Errors are the store's.
func (s *Service) EraseAgent(ctx context.Context, agentID string) (map[string]int, error) {
	out := map[string]int{}
	all := func(string) bool { return true }
	for range maxErasePasses {
		deleted := 0
		count := func(typ string, n int) {
			out[typ] += n
			deleted += n
		}
		for token := ""; ; {
			page, err := s.AnticipationsOf(ctx, agentID, MaxAnticipationsPage, token, all)
			if err != nil {
				return out, err
			}
			for _, rec := range page.Anticipations {
				if err := s.eraseVerifications(ctx, agentID, rec.AnticipateID, count); err != nil {
					return out, err
				}
				if rec.PlanID != "" {
					if err := s.erasePartition(ctx, executionPK(agentID, rec.PlanID), count); err != nil {
						return out, err
					}
				}
				n, err := s.deleteItem(ctx, rec.storeKey())
				if err != nil {
					return out, err
				}
				count(TypeAnticipation, n)
			}
			if token = page.NextToken; token == "" {
				break
			}
		}
		if err := eachOf(ctx, s.store, store.Query{Index: store.GSI2, PK: executionsOfPK(agentID)}, func(it store.Item) error {
			return s.erasePartition(ctx, it.PK, count)
		}); err != nil {
			return out, err
		}
		// The evaluations that graded its plans: their results hold its
		// evidence (a job of several agents goes whole).
		if err := eachOf(ctx, s.store, store.Query{PK: evaluationsOfPK(agentID)}, func(it store.Item) error {
			var m evaluationMark
			if err := json.Unmarshal(it.Data, &m); err != nil {
				return err
			}
			if err := s.erasePartition(ctx, evaluationPK(m.EvaluationID), count); err != nil {
				return err
			}
			_, err := s.deleteItem(ctx, it.Key)
			return err
		}); err != nil {
			return out, err
		}
		if err := s.eraseReviewItems(ctx, agentID, count); err != nil {
			return out, err
		}
		if err := s.eraseEvaluators(ctx, agentID, count); err != nil {
			return out, err
		}
		if deleted == 0 {
			break
		}
	}
	return out, nil
}

// eraseVerifications removes agentID's VERIFYs graded against its
// anticipation antID.
func (s *Service) eraseVerifications(ctx context.Context, agentID, antID string, count func(string, int)) error {
	return eachOf(ctx, s.store, store.Query{Index: store.GSI1, PK: byAnticipationPK(antID)}, func(it store.Item) error {
		vr, err := decode[VerificationRecord](it)
		if err != nil || vr.Verification.AgentID != agentID {
			return err // another agent's anticipation of the same id
		}
		n, err := s.deleteItem(ctx, it.Key)
		count(TypeVerification, n)
		return err
	})
}

// erasePartition removes every item of an execution's partition (the
// execution, its events and event ids).
func (s *Service) erasePartition(ctx context.Context, pk string, count func(string, int)) error {
	return eachOf(ctx, s.store, store.Query{PK: pk}, func(it store.Item) error {
		n, err := s.deleteItem(ctx, it.Key)
		count(it.Type, n)
		return err
	})
}

// eachOf calls fn for every item q finds, page after page. The items of a
// page are read before fn changes any, and the next page resumes after the
// last item read.
func eachOf(ctx context.Context, st store.Store, q store.Query, fn func(store.Item) error) error {
	q.Limit = store.MaxLimit
	for {
		p, err := st.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range p.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		q.After = p.Next
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
