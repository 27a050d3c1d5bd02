package watcher

import (
	"context"
	"errors"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// AgentsPK is the gsi5 partition that lists agent cards, in agent id order.
// Its sort key is the agent id itself, unescaped (the listing reads the id
// back from it; ids are at most 256 bytes, well within a sort key). A card
// enters it when it is PUT (cards stored before the listing existed appear
// once they are PUT again).
const AgentsPK = "AGENTS"

func cardIndex(agentID string) map[store.IndexName]store.IndexKey {
	return map[store.IndexName]store.IndexKey{store.GSI5: {PK: AgentsPK, SK: agentID}}
}

// AgentsPage is one page of the agent listing.
type AgentsPage struct {
	Cards     []expect.Card
	NextToken string
}

// Agents returns one page of the stored agent cards, in agent id order,
// keeping those may accepts (the agents the caller may act for). limit is
// 1 to MaxPageSize (0: 100); NextToken is empty on the last page and never
// names a card may refuses. A bad limit or
// a token this service did not issue is an Invalid error naming the field.
func (s *Service) Agents(ctx context.Context, limit int, nextToken string, may func(agentID string) bool) (AgentsPage, error) {
	if limit < 0 || limit > MaxPageSize {
		return AgentsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: "must be between 1 and 500 (0 or none: 100)"}})
	}
	if limit == 0 {
		limit = 100
	}
	// A page token names the last item read. It must never name a card
	// the caller may not see (another tenant's agent id would be in it),
	// so the listing reads on past refused cards and, when it stops after
	// one, positions its token just after the last card it kept.
	out := AgentsPage{Cards: []expect.Card{}}
	after := nextToken
	for {
		q := store.Query{Index: store.GSI5, PK: AgentsPK, Limit: limit - len(out.Cards), After: after}
		p, err := s.store.Query(ctx, q)
		if errors.Is(err, store.ErrInvalid) {
			return AgentsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
		}
		if err != nil {
			return AgentsPage{}, internal(err)
		}
		lastKept := -1
		for i, it := range p.Items {
			if it.Type != TypeCard {
				continue
			}
			agentID := it.Index[store.GSI5].SK
			if agentID == "" || !may(agentID) {
				continue
			}
			lastKept = i
			card, err := expect.ParseCard(agentID, it.Data)
			if err != nil {
				// A card that no longer parses is listed by id only, so an
				// operator can see it and PUT it again.
				out.Cards = append(out.Cards, expect.Card{AgentID: agentID, Raw: it.Data})
				continue
			}
			out.Cards = append(out.Cards, card)
		}
		switch {
		case p.Next == "":
			return out, nil
		case len(out.Cards) < limit:
			after = p.Next // all read so far was refused or the page is not full
			continue
		case lastKept == len(p.Items)-1:
			out.NextToken = p.Next
			return out, nil
		}
		// Full, but refused cards follow the last kept one: read the page
		// again up to that card, for a token that names it.
		q.Limit = lastKept + 1
		p2, err := s.store.Query(ctx, q)
		if err != nil {
			return AgentsPage{}, internal(err)
		}
		out.NextToken = p2.Next
		return out, nil
	}
}
