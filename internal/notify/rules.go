package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// PutRules replaces agent's alert rules, set by a principal acting for
// agents (the caller checked it may act for agent). A rule may name only
// channels the principal can see or that are shared, and that serve
// agent. Errors: Invalid
// naming the field (an unknown channel or event type among them).
func (s *Service) PutRules(ctx context.Context, agents []string, agent string, body []byte) (alert.Rules, error) {
	known := map[string]bool{}
	var channels []alert.Channel
	var loadErr error
	usable := func(id string) bool {
		if v, ok := known[id]; ok {
			return v
		}
		c, err := s.channel(ctx, id)
		if err != nil && !errs.Is(err, errs.NotFound) {
			loadErr = err
		}
		known[id] = err == nil && c.UsableBy(agents) && c.Serves(agent, slices.Contains(agents, "*"))
		if known[id] {
			channels = append(channels, c.Channel)
		}
		return known[id]
	}
	rules, err := alert.ParseRules(agent, body, usable)
	if loadErr != nil {
		return alert.Rules{}, loadErr
	}
	if err != nil {
		return alert.Rules{}, err
	}
	rules.UpdatedAt = expect.FormatTime(s.opt.Now())
	rules.ByOperator = slices.Contains(agents, "*")
	// A reminder is not an incident: PagerDuty would open one that
	// nothing resolves when the expectation is met in time.
	byID := map[string]alert.Channel{}
	for _, c := range channels {
		byID[c.ID] = c
	}
	for i, r := range rules.Rules {
		if r.Repeat != nil && r.Repeat.EveryOf() < s.opt.MinRepeat {
			return alert.Rules{}, errs.Fields("the rules are not valid", []errs.FieldError{{Path: fmt.Sprintf("rules[%d].repeat.every", i),
				Message: fmt.Sprintf("must be at least %v on this server", s.opt.MinRepeat)}})
		}
		// An otlp channel carries scores: what else would become a log
		// record no collector expects.
		for j, id := range r.Channels {
			if byID[id].Type != alert.OTLP {
				continue
			}
			if r.Cooldown != "" {
				return alert.Rules{}, errs.Fields("the rules are not valid", []errs.FieldError{{Path: fmt.Sprintf("rules[%d].cooldown", i),
					Message: "does not go with an otlp channel: a cooldown would hold scores back, which then never reach it"}})
			}
			for _, ev := range r.On {
				if ev != alert.VerificationCompleted && ev != alert.VerificationFailed {
					return alert.Rules{}, errs.Fields("the rules are not valid", []errs.FieldError{{Path: fmt.Sprintf("rules[%d].channels[%d]", i, j),
						Message: fmt.Sprintf("is an otlp channel, which carries VERIFYs' scores (verification.completed, verification.failed), not %s: name it in a rule of its own", ev)}})
				}
			}
		}
		// Every plan's completion is no incident either: nothing would
		// resolve the PagerDuty incident of a PASS.
		if slices.Contains(r.On, alert.VerificationCompleted) {
			for j, id := range r.Channels {
				if byID[id].Type == alert.PagerDuty {
					return alert.Rules{}, errs.Fields("the rules are not valid", []errs.FieldError{{Path: fmt.Sprintf("rules[%d].channels[%d]", i, j),
						Message: "is a pagerduty channel: verification.completed (every plan's scores) is not an incident; page on verification.failed or evaluation.pass_rate_below"}})
				}
			}
		}
		if !slices.Contains(r.On, alert.DueSoon) {
			continue
		}
		for j, id := range r.Channels {
			if byID[id].Type == alert.PagerDuty {
				return alert.Rules{}, errs.Fields("the rules are not valid", []errs.FieldError{{Path: fmt.Sprintf("rules[%d].channels[%d]", i, j),
					Message: "is a pagerduty channel: a reminder (expectation.due_soon) is not an incident; name it in a rule of its own without expectation.due_soon"}})
			}
		}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return alert.Rules{}, err
	}
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		if _, _, err := tx.Get(ctx, rulesKey(agent)); err != nil {
			return err
		}
		tx.Put(store.Item{Key: rulesKey(agent), Type: TypeRules, Data: b})
		return nil
	})
	s.forgetRules(agent)
	return rules, err
}

// Rules returns agent's rules (an empty list when it has none).
func (s *Service) Rules(ctx context.Context, agent string) (alert.Rules, error) {
	it, err := s.store.Get(ctx, rulesKey(agent))
	if errors.Is(err, store.ErrNotFound) {
		return alert.Rules{AgentID: agent, Rules: []alert.Rule{}}, nil
	}
	if err != nil {
		return alert.Rules{}, err
	}
	var r alert.Rules
	if err := json.Unmarshal(it.Data, &r); err != nil {
		return alert.Rules{}, err
	}
	if r.Rules == nil {
		r.Rules = []alert.Rule{}
	}
	return r, nil
}

// DeleteRules removes agent's rules. Errors: NotFound when it has none.
func (s *Service) DeleteRules(ctx context.Context, agent string) error {
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		_, ok, err := tx.Get(ctx, rulesKey(agent))
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "agent %q has no alert rules", agent)
		}
		tx.Delete(rulesKey(agent))
		return nil
	})
}
