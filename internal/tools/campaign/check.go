package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
)

// ---------------------------------------------------------------------------
// Settle and read back.

// list reads every record of the agent in the given state ("" for all).
func (c *campaign) list(state string) ([]*expect.Record, error) {
	var out []*expect.Record
	next := ""
	for {
		q := url.Values{"limit": {"500"}}
		if state != "" {
			q.Set("state", state)
		}
		if next != "" {
			q.Set("nextToken", next)
		}
		var code int
		var b []byte
		for attempt := 0; ; attempt++ {
			code, b = c.srv.call("GET", "/v1/agents/"+c.agID+"/expectations?"+q.Encode(), nil)
			if code == 200 || attempt == 5 {
				break
			}
			time.Sleep(time.Second)
		}
		if code != 200 {
			return nil, fmt.Errorf("listing expectations: %d %s", code, trim(b))
		}
		var page struct {
			Records   []*expect.Record
			NextToken string
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("listing expectations: %w", err)
		}
		out = append(out, page.Records...)
		if page.NextToken == "" {
			return out, nil
		}
		next = page.NextToken
	}
}

// settle waits (bounded) until no expectation is open and every lapse has a
// lapseTaskId or is dead-lettered, and returns every record.
func (c *campaign) settle(ctx context.Context, bound time.Duration) ([]*expect.Record, error) {
	start := time.Now()
	deadline := start.Add(bound)
	lastPrint := time.Now()
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		polled := time.Now()
		open, err := c.list(string(expect.StateOpen))
		if err != nil {
			return nil, err
		}
		pending := len(open)
		undelivered := 0
		var all []*expect.Record
		if pending == 0 {
			all, err = c.list("")
			if err != nil {
				return nil, err
			}
			for _, r := range all {
				switch {
				case r.State == expect.StateOpen:
					pending++
				case r.State == expect.StateLapsed && r.LapseTaskID == "" && (r.Delivery == nil || !r.Delivery.DeadLettered):
					undelivered++
				}
			}
			if pending == 0 && undelivered == 0 {
				fmt.Fprintf(c.out, "settled in %s: %d records\n", time.Since(start).Round(time.Millisecond), len(all))
				return all, nil
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(c.out, "not settled after %s: %d open, %d lapses undelivered; checking as is\n", bound, pending, undelivered)
			if all == nil {
				if all, err = c.list(""); err != nil {
					return nil, err
				}
			}
			return all, nil
		}
		if time.Since(lastPrint) > 5*time.Second {
			fmt.Fprintf(c.out, "  ... %s: %d open, %d lapses undelivered\n", time.Since(start).Round(time.Second), pending, undelivered)
			lastPrint = time.Now()
		}
		// Listing is not free (on moto it competes with the server for the
		// emulator): keep it to a fifth of the time.
		time.Sleep(max(500*time.Millisecond, 4*time.Since(polled)))
	}
}

// ---------------------------------------------------------------------------
// Check.

type receipt struct {
	messageIDs map[string]int // messageId -> times received
	taskIDs    map[string]bool
	lapse      map[string]bool // lapse kind + dueAt seen
}

func (c *campaign) check(recs []*expect.Record, received []a2atest.Received, res *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := func(kind, format string, args ...any) {
		c.violations = append(c.violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	lost := func(format string, args ...any) {
		res.Lost++
		v("lost", format, args...)
	}
	byID := map[string]*expect.Record{}
	for _, r := range recs {
		id := r.Expectation.ExpectationID
		if byID[id] != nil {
			v("duplicate record", "%s is listed twice", id)
		}
		byID[id] = r
		if c.exps[id] == nil {
			v("phantom", "the server holds %s, which was never raised", id)
		}
	}
	// What the agent received, by expectation.
	got := map[string]*receipt{}
	res.AgentMessages = len(received)
	for _, m := range received {
		md, _ := m.Metadata[expect.URI].(map[string]any)
		l, _ := md["lapse"].(map[string]any)
		id, _ := l["expectationId"].(string)
		kind, _ := l["lapse"].(string)
		due, _ := l["dueAt"].(string)
		if id == "" {
			v("agent", "the agent received message %s without a lapse in its metadata", m.MessageID)
			continue
		}
		if want := expect.MessageID(id, expect.LapseKind(kind), due); m.MessageID != want {
			v("duplicated", "the agent received a lapse of %s (%s, dueAt %s) under messageId %s, want %s", id, kind, due, m.MessageID, want)
		}
		rc := got[id]
		if rc == nil {
			rc = &receipt{messageIDs: map[string]int{}, taskIDs: map[string]bool{}, lapse: map[string]bool{}}
			got[id] = rc
		}
		if rc.messageIDs[m.MessageID] > 0 {
			res.Redelivered++
		}
		rc.messageIDs[m.MessageID]++
		rc.taskIDs[m.TaskID] = true
		rc.lapse[kind+" "+due] = true
	}
	for id, rc := range got {
		if len(rc.messageIDs) > 1 {
			res.Duplicated++
			v("duplicated", "the agent received the lapse of %s under %d messageIds %v", id, len(rc.messageIDs), keys(rc.messageIDs))
		}
		r := byID[id]
		if r == nil || r.State != expect.StateLapsed {
			state := "no record"
			if r != nil {
				state = string(r.State)
			}
			v("spurious lapse", "the agent received a lapse of %s, which is %s", id, state)
		}
	}

	for _, id := range c.order {
		e := c.exps[id]
		r := byID[id]
		res.ExpectationsRaised++
		var claims []*factSent
		touchedByFact := false
		for _, f := range e.facts {
			if f.op.out == acked {
				res.Facts++
				if f.claimed {
					claims = append(claims, f)
				}
			}
			if f.op.out == unknown || (f.op.out == acked && f.claimed) {
				touchedByFact = true
			}
		}
		var wAcked []*withdrawSent
		touchedByWithdraw := false
		for _, w := range e.withdraws {
			if w.op.out == acked {
				wAcked = append(wAcked, w)
				res.Withdrawals++
			}
			if w.op.out != rejected {
				touchedByWithdraw = true
			}
		}
		if r == nil {
			switch e.raise.out {
			case acked:
				lost("%s: its raise was acknowledged (round %d) but the record is gone", id, e.raise.round)
			case rejected:
			default:
				// unknown raise that did not commit: nothing else may refer to it.
			}
			if len(claims) > 0 || len(wAcked) > 0 {
				lost("%s: facts or withdrawals on it were acknowledged but the record is gone", id)
			}
			if got[id] != nil {
				v("spurious lapse", "the agent received a lapse of %s, which does not exist", id)
			}
			continue
		}
		res.Expectations++
		if e.raise.out == rejected {
			v("phantom", "%s exists although its raise was answered %d", id, e.raise.status)
		}
		if !sameBody(r.Expectation, e.body) {
			v("state", "%s: stored body differs from the one raised", id)
		}
		if r.ProjectedDueAt != e.body.DueAt {
			v("state", "%s: projectedDueAt %s, raised with dueAt %s", id, r.ProjectedDueAt, e.body.DueAt)
		}
		// The due time: as raised, or re-anchored on the anchor's satisfaction.
		if r.DueAt != e.body.DueAt {
			ok := false
			if e.body.Anchor != nil {
				if a := byID[e.body.Anchor.ExpectationID]; a != nil && a.SatisfiedBy != nil {
					off, _ := expect.ParseDuration(e.body.Anchor.Offset)
					obs, _ := expect.ParseTime(a.ObservedAt)
					ok = r.DueAt == expect.FormatTime(off.AddTo(obs))
				}
			}
			if !ok {
				v("state", "%s: dueAt %s is neither its raised dueAt %s nor its anchor's satisfaction plus offset", id, r.DueAt, e.body.DueAt)
			}
		}
		switch r.State {
		case expect.StateSatisfied:
			res.Satisfied++
		case expect.StateWithdrawn:
			res.Withdrawn++
		case expect.StateLapsed:
			res.Lapses++
		}
		// Facts.
		if len(claims) > 1 {
			v("state", "%s was answered as satisfied by %d acknowledged facts; only the first can satisfy it", id, len(claims))
		}
		if len(claims) > 0 {
			f := claims[0]
			if r.SatisfiedBy == nil {
				lost("%s: an acknowledged fact (round %d, observedAt %s) satisfied it, but it is %s without satisfiedBy", id, f.op.round, f.observedAt, r.State)
			} else if r.ObservedAt != f.observedAt {
				lost("%s: satisfied by the acknowledged fact observed at %s, but records observedAt %s", id, f.observedAt, r.ObservedAt)
			}
			if r.State == expect.StateLapsed && r.Lapse != nil {
				if lt, err := expect.ParseTime(r.Lapse.LapsedAt); err == nil && lt.After(f.op.done) {
					v("state", "%s lapsed at %s, after the fact that satisfied it was acknowledged (%s)", id, r.Lapse.LapsedAt, expect.FormatTime(f.op.done))
				}
			}
		}
		if r.SatisfiedBy != nil {
			ok := false
			for _, f := range e.facts {
				if (f.op.out == unknown || f.claimed) && f.observedAt == r.ObservedAt {
					ok = true
				}
			}
			if !ok || r.SatisfiedBy.FactKey != e.body.SatisfiedBy.FactKey {
				v("phantom", "%s records a satisfying fact (%s at %s) that no acknowledged or unanswered fact carried", id, r.SatisfiedBy.FactKey, r.ObservedAt)
			}
			if r.State == expect.StateWithdrawn || r.State == expect.StateOpen {
				v("state", "%s is %s with a satisfying fact", id, r.State)
			}
			if r.State == expect.StateSatisfied {
				obs, _ := expect.ParseTime(r.ObservedAt)
				due, _ := expect.ParseTime(r.DueAt)
				if r.Late != obs.After(due) {
					v("state", "%s: late=%v but observedAt %s, dueAt %s", id, r.Late, r.ObservedAt, r.DueAt)
				}
			}
			if r.State == expect.StateLapsed {
				res.Late++
				if !r.Late {
					v("state", "%s is lapsed and satisfied afterwards but not marked late", id)
				}
			}
		} else if r.State == expect.StateSatisfied {
			v("state", "%s is satisfied without satisfiedBy", id)
		}
		// An acknowledged fact that did not satisfy it found it withdrawn or
		// already satisfied; both are final.
		for _, f := range e.facts {
			if f.op.out == acked && !f.claimed && r.SatisfiedBy == nil && r.State != expect.StateWithdrawn {
				v("state", "%s: an acknowledged fact on its key (round %d, observedAt %s) did not satisfy it, yet it is %s with no satisfying fact", id, f.op.round, f.observedAt, r.State)
				break
			}
		}
		// Withdrawals.
		if len(wAcked) > 0 && r.State != expect.StateWithdrawn {
			lost("%s: its withdrawal was acknowledged (round %d) but it is %s", id, wAcked[0].op.round, r.State)
		}
		if r.State == expect.StateWithdrawn && !touchedByWithdraw {
			v("phantom", "%s is withdrawn but no withdrawal of it was acknowledged or left unanswered", id)
		}
		// Instants: nothing it was sent can have resolved it, so it lapsed.
		if !touchedByFact && !touchedByWithdraw && r.State != expect.StateLapsed {
			lost("%s: no fact or withdrawal reached it and its grace ended at %s, yet it is %s", id, expect.FormatTime(r.GraceEnd()), r.State)
		}
		if r.State == expect.StateOpen {
			v("state", "%s is still open after settling (grace end %s)", id, expect.FormatTime(r.GraceEnd()))
		}
		// Skips: a successor satisfied by an acknowledged fact before this
		// one's grace end skips it when nothing else resolved it.
		if !touchedByFact && !touchedByWithdraw && e.body.Anchor == nil {
			var ge time.Time
			if d, err := expect.ParseDuration(e.body.Grace); err == nil || e.body.Grace == "" {
				due, _ := expect.ParseTime(e.body.DueAt)
				ge = due
				if e.body.Grace != "" {
					ge = d.AddTo(due)
				}
			}
			for _, sid := range e.successors {
				for _, f := range c.exps[sid].facts {
					if f.op.out == acked && f.claimed && f.op.done.Before(ge) && (r.Lapse == nil || r.Lapse.Lapse != expect.Skipped) {
						v("state", "%s: its successor %s was satisfied by a fact acknowledged at %s, before its grace end %s, yet it is %s (%s), not skipped",
							id, sid, expect.FormatTime(f.op.done), expect.FormatTime(ge), r.State, lapseKind(r))
					}
				}
			}
		}
		// The lapse itself.
		if r.State == expect.StateLapsed {
			l := r.Lapse
			if l == nil {
				v("state", "%s is lapsed without a lapse", id)
				continue
			}
			if l.DueAt != r.DueAt || l.ExpectationID != id || l.ProjectedDueAt != e.body.DueAt {
				v("state", "%s: lapse carries dueAt %s projectedDueAt %s, record dueAt %s", id, l.DueAt, l.ProjectedDueAt, r.DueAt)
			}
			lapsedAt, _ := expect.ParseTime(l.LapsedAt)
			switch l.Lapse {
			case expect.Overdue:
				if lapsedAt.Before(r.GraceEnd()) {
					v("state", "%s lapsed overdue at %s, before its grace end %s", id, l.LapsedAt, expect.FormatTime(r.GraceEnd()))
				}
			case expect.Skipped:
				if len(l.SatisfiedAfter) == 0 {
					v("state", "%s was skipped with no satisfied successor named", id)
				}
				for _, sid := range l.SatisfiedAfter {
					s := byID[sid]
					if !slices.Contains(e.successors, sid) || s == nil || s.SatisfiedBy == nil {
						v("state", "%s was skipped after %s, which is not a satisfied successor of it", id, sid)
					}
				}
			default:
				v("state", "%s lapsed %q; it has no horizon, so only overdue or skipped are possible", id, l.Lapse)
			}
			want := expect.MessageID(id, l.Lapse, l.DueAt)
			if r.Delivery == nil || r.Delivery.MessageID != want {
				v("duplicated", "%s: delivery messageId %v, want %s", id, r.Delivery, want)
			}
			if r.Delivery != nil && r.Delivery.DeadLettered {
				lost("%s: its lapse was dead-lettered (%d attempts, last error %q)", id, r.Delivery.Attempts, r.Delivery.LastError)
			}
			rc := got[id]
			switch {
			case rc == nil:
				lost("%s lapsed %s (lapseTaskId %q) but the agent never received it", id, l.Lapse, r.LapseTaskID)
			case rc.messageIDs[want] == 0:
				lost("%s lapsed %s but the agent received only messageIds %v, not %s", id, l.Lapse, keys(rc.messageIDs), want)
			case r.LapseTaskID == "":
				lost("%s: the agent received its lapse but the record has no lapseTaskId", id)
			case !rc.taskIDs[r.LapseTaskID]:
				v("state", "%s: lapseTaskId %s is none of the tasks the agent created for it", id, r.LapseTaskID)
			}
			if rc != nil && (len(rc.lapse) != 1 || !rc.lapse[string(l.Lapse)+" "+l.DueAt]) {
				v("duplicated", "%s: the agent received lapses %v, the record says %s %s", id, keys(rc.lapse), l.Lapse, l.DueAt)
			}
		} else if r.Lapse != nil || r.LapseTaskID != "" {
			v("state", "%s is %s but carries a lapse", id, r.State)
		}
	}
	for _, f := range c.noise {
		if f.op.out == acked {
			res.Facts++
			if f.claimed {
				v("phantom", "fact %s, which names no expectation, was answered as satisfying one", f.key)
			}
		}
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func lapseKind(r *expect.Record) string {
	if r.Lapse == nil {
		return "no lapse"
	}
	return string(r.Lapse.Lapse)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *campaign) report(res *Result) {
	out := c.out
	fmt.Fprintf(out, "\n== kill -9 campaign ==\n")
	if c.cfg.NoKill {
		fmt.Fprintf(out, "rounds (baseline, no kill):          %d\n", res.Rounds)
	} else {
		fmt.Fprintf(out, "rounds survived (kill -9 + restart): %d\n", res.Rounds)
	}
	fmt.Fprintf(out, "operations acknowledged:             %d (unknown %d, refused %d; requests: %d raises, %d fact reports, %d withdrawals)\n",
		res.Acked, res.Unknown, res.Refused, res.Raises, res.FactReports, res.WithdrawalRequests)
	fmt.Fprintf(out, "expectations checked:                %d of %d raised (satisfied %d, withdrawn %d, lapsed %d of which %d satisfied late)\n",
		res.Expectations, res.ExpectationsRaised, res.Satisfied, res.Withdrawn, res.Lapses, res.Late)
	fmt.Fprintf(out, "facts checked:                       %d acknowledged\n", res.Facts)
	fmt.Fprintf(out, "withdrawals checked:                 %d acknowledged\n", res.Withdrawals)
	fmt.Fprintf(out, "lapses checked:                      %d (agent messages %d, redelivered with the same messageId %d)\n", res.Lapses, res.AgentMessages, res.Redelivered)
	fmt.Fprintf(out, "lost:                                %d\n", res.Lost)
	fmt.Fprintf(out, "duplicated messageIds:               %d\n", res.Duplicated)
	if f := res.Faults; f != nil {
		fmt.Fprintf(out, "faults injected by the emulator:     %d throttled calls, %d transaction conflicts, %d transactions cancelled for throttling, %d Scheduler writes throttled, %d items hidden from lagging GSI queries\n",
			f.Throttled, f.Conflicts, f.TxThrottled, f.SchedulerThrottled, f.HiddenFromIndex)
	}
	fmt.Fprintf(out, "sustained load:                      %.0f ops/s under load (%.1fs), %.0f ops/s over the campaign's wall time (%.1fs, restarts included)\n",
		res.OpsPerSec, res.LoadTime.Seconds(), res.WallOpsPerSec, res.WallTime.Seconds())
	if res.Rounds > 0 {
		fmt.Fprintf(out, "restart after kill -9:               mean %dms, max %dms\n", (res.SumRestart / time.Duration(res.Rounds)).Milliseconds(), res.MaxRestart.Milliseconds())
	}
	if len(res.Violations) == 0 {
		fmt.Fprintf(out, "violations:                          0\n")
		return
	}
	byKind := map[string][]string{}
	for _, v := range res.Violations {
		byKind[v.Kind] = append(byKind[v.Kind], v.Detail)
	}
	fmt.Fprintf(out, "VIOLATIONS:                          %d\n", len(res.Violations))
	for _, k := range keys(byKind) {
		fmt.Fprintf(out, "  %s: %d\n", k, len(byKind[k]))
		for i, d := range byKind[k] {
			if i == 20 {
				fmt.Fprintf(out, "    ... and %d more\n", len(byKind[k])-20)
				break
			}
			fmt.Fprintf(out, "    %s\n", d)
		}
	}
}
