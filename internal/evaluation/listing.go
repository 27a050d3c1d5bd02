package evaluation

import (
	"context"
	"errors"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// MaxAnticipationsPage bounds one page of an agent's anticipations.
const MaxAnticipationsPage = 100

// AnticipationsPage is one page of an agent's anticipations, newest first.
type AnticipationsPage struct {
	Anticipations []*AnticipationRecord
	NextToken     string
}

// AnticipationsOf returns one page of the ANTICIPATEs declared for agentID
// (its agent_id), newest first. limit is 1 to MaxAnticipationsPage (0: 20).
// The caller must be allowed to act for agentID (Forbidden otherwise); a bad
// limit or a token this service did not issue is an Invalid error naming the
// field. The listing reads a global index, so on DynamoDB a declaration may
// appear a moment after it was acknowledged.
func (s *Service) AnticipationsOf(ctx context.Context, agentID string, limit int, nextToken string, may Authorizer) (AnticipationsPage, error) {
	if !may(agentID) {
		return AnticipationsPage{}, forbidden(agentID)
	}
	if limit < 0 || limit > MaxAnticipationsPage {
		return AnticipationsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: "must be between 1 and 100 (0 or none: 20)"}})
	}
	if limit == 0 {
		limit = 20
	}
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI5, PK: byAgentPK(agentID), Limit: limit, Descending: true, After: nextToken})
	if errors.Is(err, store.ErrInvalid) {
		return AnticipationsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return AnticipationsPage{}, wrap(err)
	}
	out := AnticipationsPage{Anticipations: []*AnticipationRecord{}, NextToken: p.Next}
	for _, it := range p.Items {
		if it.Type != TypeAnticipation {
			continue
		}
		rec, err := decodeAnticipation(it)
		if err != nil {
			return AnticipationsPage{}, wrap(err)
		}
		if rec.AgentID == agentID {
			out.Anticipations = append(out.Anticipations, rec)
		}
	}
	return out, nil
}
