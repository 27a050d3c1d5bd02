package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// openState is in an open expectation record's JSON (as encoding/json
// writes it), and in no other.
var openState = []byte(`"state":"open"`)

// reminderView is the part of an expectation record that decides whether
// a change calls for a reminder (expectation.due_soon).
type reminderView struct {
	AgentID     string       `json:"agentId"`
	State       expect.State `json:"state"`
	DueAt       string       `json:"dueAt"`
	RaisedAt    string       `json:"raisedAt"`
	Expectation struct {
		ExpectationID string         `json:"expectationId"`
		Kind          string         `json:"kind"`
		Subject       expect.Subject `json:"subject"`
		Expects       string         `json:"expects"`
	} `json:"expectation"`
}

// reminders makes the expectation.due_soon notifications of an expectation
// that was raised, or whose due time moved, while open: one per rule that
// names the event (and its kind), and channel, at dueAt less the rule's
// before, unless that time had passed when it was raised (or its due time
// moved). A reminder made for an earlier due time is skipped when its
// time comes (alert.StillOpen).
func (s *Service) reminders(ctx context.Context, ch store.Change) error {
	// Every change of an expectation comes here: one that is not open
	// (most of them, and the feed's hot path) is passed over undecoded.
	if ch.New == nil || !bytes.Contains(ch.New.Data, openState) {
		return nil
	}
	var n, o reminderView
	if err := json.Unmarshal(ch.New.Data, &n); err != nil {
		return fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	if n.State != expect.StateOpen || n.DueAt == "" {
		return nil
	}
	if ch.Old != nil {
		if json.Unmarshal(ch.Old.Data, &o) == nil && o.State == expect.StateOpen && o.DueAt == n.DueAt {
			return nil // nothing about its due time changed
		}
	}
	rules, err := s.cachedRules(ctx, n.AgentID)
	if err != nil {
		return err
	}
	due, err := expect.ParseTime(n.DueAt)
	if err != nil {
		return nil
	}
	// The earliest a reminder may be: when the expectation was raised, or
	// (a due time that moved) now.
	from := s.opt.Now()
	if ch.Old == nil {
		if t, err := expect.ParseTime(n.RaisedAt); err == nil {
			from = t
		}
	}
	e := n.Expectation
	for _, r := range rules.Rules {
		before := r.BeforeOf()
		if before <= 0 {
			continue
		}
		at := due.Add(-before)
		if at.Before(from) {
			continue
		}
		occ := alert.Occurrence{
			Event: alert.Event{Type: alert.DueSoon, Timestamp: expect.FormatTime(at), Data: alert.EventData{AgentID: n.AgentID, Record: ch.New.Data}},
			About: alert.Subject{ExpectationID: e.ExpectationID, Kind: e.Kind, SubjectType: e.Subject.Type, SubjectID: e.Subject.ID, Expects: e.Expects, DueAt: n.DueAt},
			Key:   string(alert.DueSoon) + "\x00" + n.AgentID + "\x00" + e.ExpectationID + "\x00" + n.DueAt,
		}
		if !r.Matches(occ) {
			continue
		}
		if err := s.create(ctx, n.AgentID, rules.ByOperator, r, occ); err != nil {
			return err
		}
	}
	return nil
}

// rulesTTL is how long a process keeps an agent's rules for deciding on
// reminders, which every raise asks about: a rule changed in another
// process (on AWS, the API function) applies to reminders within it.
const rulesTTL = 5 * time.Second

type rulesCache struct {
	mu sync.Mutex
	m  map[string]cachedRules
}

type cachedRules struct {
	rules alert.Rules
	at    time.Time
}

// cachedRules returns agent's rules as read within rulesTTL.
func (s *Service) cachedRules(ctx context.Context, agent string) (alert.Rules, error) {
	now := time.Now()
	s.rules.mu.Lock()
	c, ok := s.rules.m[agent]
	s.rules.mu.Unlock()
	if ok && now.Sub(c.at) < rulesTTL {
		return c.rules, nil
	}
	rules, err := s.Rules(ctx, agent)
	if err != nil {
		return alert.Rules{}, err
	}
	s.rules.mu.Lock()
	if s.rules.m == nil || len(s.rules.m) >= 10000 {
		s.rules.m = map[string]cachedRules{}
	}
	s.rules.m[agent] = cachedRules{rules: rules, at: now}
	s.rules.mu.Unlock()
	return rules, nil
}

// forgetRules drops agent's cached rules (after this process changed them).
func (s *Service) forgetRules(agent string) {
	s.rules.mu.Lock()
	delete(s.rules.m, agent)
	s.rules.mu.Unlock()
}
