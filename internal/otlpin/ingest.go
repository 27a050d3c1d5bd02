package otlpin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/store"
)

// PlansAtOnce bounds the plans of one export appended at the same time.
const PlansAtOnce = 16

// Ingester appends the events of exported spans to their plans.
type Ingester struct {
	Eval *evaluation.Service
}

// Result is what an export answers: the spans rejected (bound to no plan,
// naming an agent the token may not act for, or refused by the plan: after
// PLAN_COMPLETE, no ANTICIPATE binding it, an invalid event) and why.
type Result struct {
	Rejected int64
	Message  string
}

// Export binds every span of d to a plan and appends its events, plan by
// plan, each plan's events ordered by time (PLAN_COMPLETE last). Event ids
// derive from the trace, span and role, so exporting the same batch again
// appends nothing new. A span that cannot be appended is counted in the
// result, not an error; an error means the store failed (retry the export).
func (in *Ingester) Export(ctx context.Context, d Decoded, c evaluation.Caller) (Result, error) {
	// First every span's plan and (named) agent; then, per plan, one agent
	// for all its events (a framework names the agent on the root span
	// only), and every event of the plan ordered together.
	type planned struct {
		se    SpanEvents
		agent string
	}
	byPlan := map[string][]planned{}
	var order []string
	rejected := map[string]string{} // span key -> reason
	refusedOnWire := map[string]bool{}
	for _, r := range d.Refused {
		rejected[r.Key], refusedOnWire[r.Key] = r.Reason, true
	}
	convs := map[[2]string]string{}
	for _, se := range Map(d.Traces) {
		if refusedOnWire[se.Key] {
			continue
		}
		if se.Invalid != "" {
			rejected[se.Key] = se.Invalid
			continue
		}
		agent := se.Agent
		if agent != "" && c.May != nil && !c.May(agent) {
			rejected[se.Key] = fmt.Sprintf("this token may not act for agent %q", agent)
			continue
		}
		plan := se.Plan
		if plan == "" && se.Conversation != "" {
			who := agent
			if who == "" {
				who = c.Only
			}
			if who == "" {
				rejected[se.Key] = "a span bound by gen_ai.conversation.id needs its agent (gen_ai.agent.id) or a token for one agent"
				continue
			}
			key := [2]string{who, se.Conversation}
			p, seen := convs[key]
			if !seen {
				var err error
				if p, err = in.planOfConversation(ctx, who, se.Conversation, c); err != nil {
					return Result{}, err
				}
				convs[key] = p
			}
			plan, agent = p, who
		}
		if plan == "" {
			rejected[se.Key] = "bound to no plan: set aigp.plan_id, or gen_ai.conversation.id equal to the session_id of exactly one open plan"
			continue
		}
		if _, ok := byPlan[plan]; !ok {
			order = append(order, plan)
		}
		byPlan[plan] = append(byPlan[plan], planned{se: se, agent: agent})
	}
	// Each plan's events are one batch; the plans of an export are
	// appended side by side, so that the store's group commit makes their
	// commits one write to disk rather than one after the other.
	type batch struct {
		plan  string
		raws  [][]byte
		spans []string
	}
	var batches []batch
	for _, plan := range order {
		agents := map[string]bool{}
		for _, p := range byPlan[plan] {
			if p.agent != "" {
				agents[p.agent] = true
			}
		}
		agent := ""
		if len(agents) > 1 {
			for _, p := range byPlan[plan] {
				rejected[p.se.Key] = fmt.Sprintf("plan %q: its spans name several agents", plan)
			}
			continue
		}
		for a := range agents {
			agent = a
		}
		var evs []Event
		for _, p := range byPlan[plan] {
			evs = append(evs, p.se.Events...)
		}
		Order(evs)
		b := batch{plan: plan}
		for _, ev := range evs {
			if rejected[ev.Span] != "" {
				continue
			}
			if agent != "" {
				ev.Body["agent_id"] = agent
			}
			// Without HTML escaping, the body is usually canonical
			// JSON already (encoding/json sorts a map's keys and writes
			// numbers as ECMAScript does), which spares the append its
			// RFC 8785 transform.
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(ev.Body); err != nil {
				return Result{}, err
			}
			raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			b.raws, b.spans = append(b.raws, raw), append(b.spans, ev.Span)
		}
		batches = append(batches, b)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(PlansAtOnce)
	for _, b := range batches {
		g.Go(func() error {
			results, err := in.Eval.AppendEvents(gctx, b.plan, b.raws, c)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range results {
				if r.Err == nil {
					continue
				}
				if errors.Is(r.Err, store.ErrTooLarge) {
					rejected[b.spans[i]] = fmt.Sprintf("plan %q: the event is too large to store", b.plan)
					continue
				}
				switch errs.CodeOf(r.Err) {
				case errs.Invalid, errs.NotFound, errs.Conflict, errs.Forbidden, errs.TooLarge:
					rejected[b.spans[i]] = fmt.Sprintf("plan %q: %s", b.plan, messageOf(r.Err))
					continue
				}
				return r.Err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	return summarize(rejected), nil
}

// summarize counts the rejected spans and joins the first few reasons.
func summarize(rejected map[string]string) Result {
	if len(rejected) == 0 {
		return Result{}
	}
	reasons := map[string]int{}
	for _, r := range rejected {
		reasons[r]++
	}
	var parts []string
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d span(s): %s", n, r))
	}
	sort.Strings(parts)
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d other reasons", len(parts)-5))
	}
	return Result{Rejected: int64(len(rejected)), Message: strings.Join(parts, "; ")}
}

// planOfConversation returns the plan of agent's declared, not completed
// plans whose ANTICIPATE's session_id is conversation, when exactly one
// is; when none is open but exactly one completed plan has that session,
// that one (so an exporter's retry of a batch that completed the plan
// binds where it did, appends nothing new, and a new span is refused as
// after PLAN_COMPLETE); "" otherwise.
func (in *Ingester) planOfConversation(ctx context.Context, agent, conversation string, c evaluation.Caller) (string, error) {
	if c.May != nil && !c.May(agent) {
		return "", nil
	}
	open, done, err := in.Eval.PlansOfSession(ctx, agent, conversation)
	if err != nil {
		return "", err
	}
	switch {
	case len(open) == 1:
		return open[0], nil
	case len(open) == 0 && len(done) == 1:
		return done[0], nil
	}
	return "", nil
}

// messageOf is what a span's rejection says of an event's refusal: the
// error's client-safe message (and its fields).
func messageOf(err error) string {
	var e *errs.Error
	if !errors.As(err, &e) {
		return "refused"
	}
	msg := e.Message
	for _, f := range e.Fields {
		msg += "; " + f.Path + " " + f.Message
	}
	return msg
}
