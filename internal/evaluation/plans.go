package evaluation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// Caller is who makes a request: the agents it may act for, and the one
// agent its token names when it names exactly one (empty when it names
// several, or "*").
type Caller struct {
	May  Authorizer
	Only string
}

// planAgent decides which agent's execution of planID an event (or a read)
// addresses. An execution belongs to exactly one agent: the one the event
// names; else the caller's single agent; else, for a caller acting for
// several agents, the one of them whose declarations or execution the plan
// id already names; "" when none of them does. Errors: Forbidden when the
// event names an agent the caller may not act for (whatever is stored);
// Invalid naming agent_id when several of the caller's agents do.
func planAgent(ctx context.Context, tx *store.Tx, planID, named string, c Caller) (string, error) {
	return ownerFor(c, named, "plan", planID, func(add func(string)) error {
		declared, err := tx.Lookup(ctx, lookupBound, planBoundPK(planID))
		if err != nil {
			return err
		}
		for _, it := range declared {
			rec, err := decodeAnticipation(it)
			if err != nil {
				return err
			}
			add(rec.AgentID)
		}
		running, err := tx.Lookup(ctx, lookupPlans, plansPK(planID))
		if err != nil {
			return err
		}
		if legacy, ok, err := tx.Get(ctx, executionKey(legacyExecutionPK(planID))); err != nil {
			return err
		} else if ok {
			running = append(running, legacy)
		}
		for _, it := range running {
			ex, err := decode[Execution](it)
			if err != nil {
				return err
			}
			add(ex.Owner())
		}
		return nil
	})
}

// ownerFor decides which agent a request about the what id addresses: the
// agent it names (Forbidden when the caller may not act for it, whatever
// is stored); else the caller's single agent; else the one among the
// caller's agents that candidates reports (through add) as holding the id,
// "" when none does, and Invalid naming agent_id when several do.
func ownerFor(c Caller, named, what, id string, candidates func(add func(agent string)) error) (string, error) {
	if named != "" {
		if !c.May(named) {
			return "", forbidden(named)
		}
		return named, nil
	}
	if c.Only != "" {
		return c.Only, nil
	}
	var agents []string
	err := candidates(func(a string) {
		if a != "" && c.May(a) && !slices.Contains(agents, a) {
			agents = append(agents, a)
		}
	})
	if err != nil {
		return "", err
	}
	switch len(agents) {
	case 0:
		return "", nil
	case 1:
		return agents[0], nil
	default:
		slices.Sort(agents)
		return "", errs.Fields("the agent of the "+what+" is ambiguous", []errs.FieldError{{Path: "agent_id",
			Message: fmt.Sprintf("is required: %s %q is declared for several agents this token acts for (%s); name one", what, id, strings.Join(agents, ", "))}})
	}
}

// loadExecution reads agentID's execution of planID in tx: at its key, or
// where an execution stored before plans were namespaced lies, when that
// one belongs to agentID. A missing execution is returned as a new one at
// its key, with exists false; both keys read are tracked.
func loadExecution(ctx context.Context, tx *store.Tx, agentID, planID string) (ex *Execution, exists bool, err error) {
	pk := executionPK(agentID, planID)
	it, ok, err := tx.Get(ctx, executionKey(pk))
	if err != nil {
		return nil, false, err
	}
	if !ok {
		if it, ok, err = tx.Get(ctx, executionKey(legacyExecutionPK(planID))); err != nil {
			return nil, false, err
		}
		if ok {
			if ex, err = decode[Execution](it); err != nil {
				return nil, false, err
			}
			if ex.Owner() == agentID {
				ex.pk, ex.version = legacyExecutionPK(planID), it.Version
				return ex, true, nil
			}
			ok = false
		}
	}
	if !ok {
		return &Execution{PlanID: planID, AgentID: agentID, Agents: []string{agentID}, pk: pk}, false, nil
	}
	if ex, err = decode[Execution](it); err != nil {
		return nil, false, err
	}
	ex.pk, ex.version = pk, it.Version
	return ex, true, nil
}

// Execution returns agentID's execution of planID, or NotFound. It does
// not authorise: callers answering a request use ExecutionFor.
func (s *Service) Execution(ctx context.Context, agentID, planID string) (*Execution, error) {
	var ex *Execution
	var exists bool
	err := store.Update(ctx, s.store, func(tx *store.Tx) (err error) {
		ex, exists, err = loadExecution(ctx, tx, agentID, planID)
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	if !exists {
		return nil, noExecution(planID)
	}
	return ex, nil
}

// ExecutionFor returns the execution of planID that the caller reads: that
// of agentID when it names one, else of the caller's single agent, else of
// the one agent among those the caller acts for that runs the plan.
// Errors: NotFound when there is none (another agent's execution of the
// same plan id answers exactly so); Forbidden when agentID names an agent
// the caller may not act for; Invalid naming agent_id when the caller acts
// for several agents that each run the plan.
func (s *Service) ExecutionFor(ctx context.Context, planID, agentID string, c Caller) (*Execution, error) {
	var ex *Execution
	var exists bool
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		agent, err := planAgent(ctx, tx, planID, agentID, c)
		if err != nil || agent == "" {
			return err
		}
		ex, exists, err = loadExecution(ctx, tx, agent, planID)
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	if !exists {
		return nil, noExecution(planID)
	}
	return ex, nil
}

func noExecution(planID string) error {
	return errs.E(errs.NotFound, "no execution of plan %q", planID)
}

// PlansOfSession returns the plans of agentID's ANTICIPATEs whose
// session_id is session, split into those not completed and those
// completed, read through a lookup (so a declaration acknowledged before
// the call is seen). ANTICIPATEs declared before sessions were indexed are
// not found here.
func (s *Service) PlansOfSession(ctx context.Context, agentID, session string) (open, completed []string, err error) {
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		open, completed = nil, nil
		items, err := tx.Lookup(ctx, lookupSessions, sessionPK(agentID, session))
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, it := range items {
			rec, err := decode[AnticipationRecord](it)
			if err != nil || rec.AgentID != agentID || rec.SessionID != session || rec.PlanID == "" || seen[rec.PlanID] {
				continue
			}
			seen[rec.PlanID] = true
			ex, exists, err := loadExecution(ctx, tx, agentID, rec.PlanID)
			if err != nil {
				return err
			}
			if exists && ex.Completed {
				completed = append(completed, rec.PlanID)
			} else {
				open = append(open, rec.PlanID)
			}
		}
		return nil
	})
	return open, completed, wrap(err)
}

// aggregate returns an execution's whole aggregate: its spilled chunks
// (read in the order they were spilled) folded in before the part the
// execution item holds. Errors are the store's, or a chunk missing.
func (s *Service) aggregate(ctx context.Context, ex *Execution) (anticipate.Aggregate, error) {
	if ex.Aggregate.Chunks == 0 {
		return ex.Aggregate, nil
	}
	chunks := make([]anticipate.Chunk, 0, ex.Aggregate.Chunks)
	err := eachOf(ctx, s.store, store.Query{PK: ex.pk, SKPrefix: "AGC#"}, func(it store.Item) error {
		c, err := decode[anticipate.Chunk](it)
		if err != nil {
			return err
		}
		chunks = append(chunks, *c)
		return nil
	})
	if err != nil {
		return anticipate.Aggregate{}, err
	}
	if len(chunks) != ex.Aggregate.Chunks {
		return anticipate.Aggregate{}, fmt.Errorf("execution of plan %s: %d of its %d aggregate chunks are stored", ex.PlanID, len(chunks), ex.Aggregate.Chunks)
	}
	return ex.Aggregate.WithChunks(chunks), nil
}
