package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// ---------------------------------------------------------------------------
// Load.

var graces = []string{"PT0.5S", "PT1S", "PT2S"}
var offsets = []string{"PT0.2S", "PT0.5S", "PT1S", "PT2S"}

func (c *campaign) worker(round int, rng *rand.Rand, stop *atomic.Bool) {
	for !stop.Load() {
		p := rng.Float64()
		switch {
		case p < 0.40:
			c.raise(round, rng)
		case p < 0.82:
			if !c.fact(round, rng) {
				c.raise(round, rng)
			}
		default:
			if !c.withdraw(round, rng) {
				c.raise(round, rng)
			}
		}
	}
}

// finish records an answer; it returns whether it was acknowledged.
func (c *campaign) finish(o *op, status int) {
	c.mu.Lock()
	o.done = time.Now()
	o.status = status
	switch {
	case status >= 200 && status < 300:
		o.out = acked
	case status == 0 || status >= 500:
		o.out = unknown
	default:
		o.out = rejected
	}
	c.mu.Unlock()
	switch o.out {
	case acked:
		c.acked.Add(1)
		c.latMu.Lock()
		c.lat = append(c.lat, o.done.Sub(o.sent))
		c.latMu.Unlock()
	case unknown:
		c.unknownN.Add(1)
	default:
		c.refused.Add(1)
	}
}

func (c *campaign) raise(round int, rng *rand.Rand) {
	c.mu.Lock()
	c.batchSeq++
	b := c.batchSeq
	c.mu.Unlock()
	n := 1 + rng.Intn(10)
	subject := fmt.Sprintf("inv-%s-%d", c.tag, b)
	now := time.Now()
	body := make([]expect.Expectation, n)
	for i := range body {
		id := fmt.Sprintf("%s-%d-%d", c.tag, b, i)
		e := expect.Expectation{
			ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: subject},
			Expects: "invoice is paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "paid." + id},
			DueAt: expect.FormatTime(now.Add(time.Duration(rng.Int63n(int64(3 * time.Second)))).Truncate(time.Millisecond)),
			Basis: "contract",
		}
		if rng.Float64() < 0.3 {
			e.Grace = graces[rng.Intn(len(graces))]
		}
		if i > 0 && rng.Float64() < 0.3 {
			e.After = []string{body[rng.Intn(i)].ExpectationID}
			if i > 1 && rng.Float64() < 0.3 {
				if other := body[rng.Intn(i)].ExpectationID; other != e.After[0] {
					e.After = append(e.After, other)
				}
			}
		}
		if i > 0 && rng.Float64() < 0.2 {
			e.Anchor = &expect.Anchor{ExpectationID: body[rng.Intn(i)].ExpectationID, Offset: offsets[rng.Intn(len(offsets))]}
		}
		body[i] = e
	}
	o := &op{round: round, sent: time.Now()}
	c.mu.Lock()
	for _, e := range body {
		c.exps[e.ExpectationID] = &exp{id: e.ExpectationID, body: e, raise: o}
		c.order = append(c.order, e.ExpectationID)
		for _, a := range e.After {
			c.exps[a].successors = append(c.exps[a].successors, e.ExpectationID)
		}
		if e.Anchor != nil {
			c.exps[e.Anchor.ExpectationID].dependents = append(c.exps[e.Anchor.ExpectationID].dependents, e.ExpectationID)
		}
	}
	c.mu.Unlock()
	c.raises.Add(1)
	raw, _ := json.Marshal(expect.RaiseRequest{TaskID: "task-" + subject, ContextID: "ctx-" + c.tag, Expectations: body})
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/expectations", raw)
	if status >= 200 && status < 300 {
		var out struct{ Records []*expect.Record }
		if err := json.Unmarshal(resp, &out); err != nil {
			c.violate("bad answer", "raise answered %d with an unreadable body: %v", status, err)
			status = 0
		} else {
			if len(out.Records) != n {
				c.violate("bad answer", "raise of %d expectations answered %d records", n, len(out.Records))
			}
			for i, r := range out.Records {
				if i >= n {
					break
				}
				e := body[i]
				switch {
				case r.Expectation.ExpectationID != e.ExpectationID:
					c.violate("bad answer", "raise answered record %d as %s, want %s", i, r.Expectation.ExpectationID, e.ExpectationID)
				case r.State != expect.StateOpen || r.DueAt != e.DueAt || !sameBody(r.Expectation, e):
					c.violate("bad answer", "raise of %s answered state %s dueAt %s (sent dueAt %s): a fresh expectation is open on its own dueAt", e.ExpectationID, r.State, r.DueAt, e.DueAt)
				}
			}
		}
	} else if status != 0 {
		c.violate("unexpected status", "raise of %s answered %d: %s", body[0].ExpectationID, status, trim(resp))
	}
	c.finish(o, status)
	if o.out == acked {
		c.mu.Lock()
		for _, e := range body {
			c.raised = append(c.raised, e.ExpectationID)
		}
		c.mu.Unlock()
	}
}

// pick returns a random acknowledged expectation: mostly a recent one, at
// times an old one (likely lapsed already).
func (c *campaign) pickLocked(rng *rand.Rand, window int, oldShare float64) *exp {
	n := len(c.raised)
	if n == 0 {
		return nil
	}
	var i int
	if rng.Float64() < oldShare {
		i = rng.Intn(n)
	} else {
		i = n - 1 - rng.Intn(min(window, n))
	}
	return c.exps[c.raised[i]]
}

func (c *campaign) fact(round int, rng *rand.Rand) bool {
	k := 1 + rng.Intn(5)
	o := &op{round: round}
	var facts []*factSent
	var owners []*exp // nil for a key that matches nothing
	c.mu.Lock()
	if len(c.raised) == 0 {
		c.mu.Unlock()
		return false
	}
	for i := 0; i < k; i++ {
		observed := expect.FormatTime(time.Now().Add(-time.Duration(rng.Int63n(int64(300 * time.Millisecond)))).Truncate(time.Microsecond))
		if rng.Float64() < 0.05 {
			f := &factSent{op: o, key: fmt.Sprintf("nothing.%s.%d", c.tag, rng.Int63()), observedAt: observed}
			c.noise = append(c.noise, f)
			facts, owners = append(facts, f), append(owners, nil)
			continue
		}
		e := c.pickLocked(rng, 3000, 0.2)
		f := &factSent{op: o, key: e.body.SatisfiedBy.FactKey, observedAt: observed}
		e.facts = append(e.facts, f)
		facts, owners = append(facts, f), append(owners, e)
	}
	o.sent = time.Now()
	c.mu.Unlock()
	c.facts.Add(1)
	body := map[string]any{"facts": func() []expect.Fact {
		out := make([]expect.Fact, len(facts))
		for i, f := range facts {
			out[i] = expect.Fact{FactKey: f.key, ObservedAt: f.observedAt}
		}
		return out
	}()}
	raw, _ := json.Marshal(body)
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/facts", raw)
	if status >= 200 && status < 300 {
		var out struct {
			Facts []struct {
				FactKey   string
				Satisfied []string
			}
		}
		if err := json.Unmarshal(resp, &out); err != nil || len(out.Facts) != len(facts) {
			c.violate("bad answer", "facts answered %d with %d outcomes for %d facts (%v)", status, len(out.Facts), len(facts), err)
			status = 0
		} else {
			c.mu.Lock()
			for i, fo := range out.Facts {
				f := facts[i]
				if fo.FactKey != f.key {
					c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %d answered for key %s, sent %s", i, fo.FactKey, f.key)})
					continue
				}
				for _, id := range fo.Satisfied {
					if owners[i] == nil || id != owners[i].id {
						c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %s answered as satisfying %s, whose fact key is another", f.key, id)})
						continue
					}
					if f.claimed {
						c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %s answered as satisfying %s twice", f.key, id)})
					}
					f.claimed = true
				}
			}
			c.mu.Unlock()
		}
	} else if status != 0 {
		c.violate("unexpected status", "facts answered %d: %s", status, trim(resp))
	}
	c.finish(o, status)
	return true
}

func (c *campaign) withdraw(round int, rng *rand.Rand) bool {
	k := 1 + rng.Intn(3)
	o := &op{round: round}
	var ids []string
	c.mu.Lock()
	if len(c.raised) == 0 {
		c.mu.Unlock()
		return false
	}
	for i := 0; i < k; i++ {
		e := c.pickLocked(rng, 400, 0)
		if slices.Contains(ids, e.id) {
			continue
		}
		ids = append(ids, e.id)
		e.withdraws = append(e.withdraws, &withdrawSent{op: o})
	}
	o.sent = time.Now()
	c.mu.Unlock()
	c.withdraws.Add(1)
	raw, _ := json.Marshal(map[string]any{"withdraw": ids, "reason": "campaign"})
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/withdrawals", raw)
	switch {
	case status >= 200 && status < 300:
		var out struct{ Records []*expect.Record }
		if err := json.Unmarshal(resp, &out); err != nil || len(out.Records) != len(ids) {
			c.violate("bad answer", "withdrawal of %v answered %d with %d records (%v)", ids, status, len(out.Records), err)
			status = 0
			break
		}
		for i, r := range out.Records {
			if r.Expectation.ExpectationID != ids[i] || r.State != expect.StateWithdrawn {
				c.violate("bad answer", "withdrawal of %s answered %s in state %s", ids[i], r.Expectation.ExpectationID, r.State)
			}
		}
	case status == http.StatusConflict, status == 0:
		// 409: one of them was no longer open (satisfied or lapsed); all or nothing.
	default:
		c.violate("unexpected status", "withdrawal of %v answered %d: %s", ids, status, trim(resp))
	}
	c.finish(o, status)
	return true
}

func sameBody(a, b expect.Expectation) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
