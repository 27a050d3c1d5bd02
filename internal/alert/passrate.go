package alert

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

// Pass-rate events: a rule naming evaluation.pass_rate_below is told when
// the share of an agent's VERIFYs (or of one criterion's grades) that pass,
// over its window, falls under its threshold, and again, with
// evaluation.pass_rate_recovered, when it is back at or over it (a
// PagerDuty incident triggered, then resolved).
const (
	PassRateBelow     EventType = "evaluation.pass_rate_below"
	PassRateRecovered EventType = "evaluation.pass_rate_recovered"
)

// Bounds of a pass-rate rule.
const (
	MinPassRateWindow = time.Minute
	MaxPassRateWindow = 7 * 24 * time.Hour
	DefaultMinPlans   = 20
	MaxMinPlans       = 100000
	// passRateBuckets is how many buckets a window is counted in: the
	// rate is over the last window to within one bucket, and the state
	// stays small whatever the window.
	passRateBuckets = 60
)

// checkPassRate validates a rule's pass-rate fields: with
// evaluation.pass_rate_below (which the rule must name alone), threshold
// in (0, 1] and window are required; otherwise none may be set.
func checkPassRate(c *errs.Collector, p string, r Rule) {
	named := false
	for _, e := range r.On {
		if e == PassRateBelow {
			named = true
		}
	}
	if !named {
		if r.Threshold != nil || r.Window != "" || r.MinPlans != 0 || r.CriterionID != "" {
			c.Add(p, "threshold, window, minPlans and criterionId go with evaluation.pass_rate_below in on")
		}
		return
	}
	if len(r.On) > 1 {
		c.Add(p+".on", "names evaluation.pass_rate_below with other events: give it a rule of its own")
	}
	if len(r.Kinds) > 0 || len(r.Lapses) > 0 || r.Cooldown != "" || r.Repeat != nil || len(r.Escalate) > 0 || r.Before != "" {
		c.Add(p, "kinds, lapses, cooldown, repeat, escalate and before do not go with evaluation.pass_rate_below")
	}
	switch {
	case r.Threshold == nil:
		c.Add(p+".threshold", "is required with evaluation.pass_rate_below: the pass rate under which to alert, in (0, 1]")
	case math.IsNaN(*r.Threshold) || *r.Threshold <= 0 || *r.Threshold > 1:
		c.Add(p+".threshold", "must be in (0, 1]")
	}
	if r.Window == "" {
		c.Add(p+".window", "is required with evaluation.pass_rate_below: how far back the rate looks (e.g. PT1H)")
	} else if _, err := parseSpan(r.Window, MinPassRateWindow, MaxPassRateWindow); err != nil {
		c.Add(p+".window", "%s", err.Error())
	}
	if r.MinPlans < 0 || r.MinPlans > MaxMinPlans {
		c.Add(p+".minPlans", "must be from 1 to %d (0 or none: %d)", MaxMinPlans, DefaultMinPlans)
	}
	if r.CriterionID != "" && (len(r.CriterionID) > anticipate.MaxIDLen || !validText(r.CriterionID)) {
		c.Add(p+".criterionId", "must be a criterion id (1 to %d bytes, no control characters)", anticipate.MaxIDLen)
	}
}

func validText(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// PassRateID names a pass-rate rule's state by what decides the rate
// (threshold, window, minPlans, criterionId), not by its channels: a rule
// whose channels are edited keeps its state (and its incident).
func (r Rule) PassRateID() string {
	threshold := 0.0
	if r.Threshold != nil {
		threshold = *r.Threshold
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%v\x00%s\x00%d\x00%s", threshold, r.Window, r.MinPlans, r.CriterionID))))[:16]
}

// WindowOf returns the rule's window (zero when it has none).
func (r Rule) WindowOf() time.Duration {
	d, _ := parseSpan(r.Window, MinPassRateWindow, MaxPassRateWindow)
	return d
}

// PassRateWindow is what a pass-rate rule remembers of one agent: the
// VERIFYs counted in the buckets of its window, whether it is firing, and
// the transition not yet made a notification (Pending; cleared once it
// is, so a crash between the two makes it on the next delivery).
type PassRateWindow struct {
	// Buckets maps a bucket's start (Unix seconds) to [passed, counted].
	Buckets map[string][2]int `json:"buckets"`
	Firing  bool              `json:"firing"`
	// Incident names the current (or last) firing, for its notifications'
	// PagerDuty dedup_key.
	Incident string      `json:"incident,omitempty"`
	Pending  *Occurrence `json:"pending,omitempty"`
}

// PassRateOf reports whether a VERIFY counts for rule r, and whether it
// passed: its verdict, or with CriterionID that criterion's status (a
// criterion not graded, or absent, does not count).
func PassRateOf(r Rule, v *anticipate.Verification) (counted, passed bool) {
	if r.CriterionID == "" {
		return v.Verdict.Final(), v.Verdict == anticipate.VerdictPass
	}
	for _, res := range v.Results {
		if res.CriterionID == r.CriterionID {
			switch res.Status {
			case anticipate.StatusPass:
				return true, true
			case anticipate.StatusFail, anticipate.StatusErrored:
				return true, false
			}
			return false, false
		}
	}
	return false, false
}

// Count adds one VERIFY, completed at at, to the window of rule r, drops
// the buckets older than the window as of now, and returns the occurrence
// the rule's state change calls for (nil: none): the rate fell under the
// threshold with at least minPlans counted (PassRateBelow), or, firing, it
// is back at or over it (PassRateRecovered). agent and ruleID name the
// rule's state; the occurrence is also kept as Pending.
func (w *PassRateWindow) Count(r Rule, agent, ruleID string, at, now time.Time, passed bool) *Occurrence {
	window, _ := parseSpan(r.Window, MinPassRateWindow, MaxPassRateWindow)
	size := max(window/passRateBuckets, time.Second)
	if w.Buckets == nil {
		w.Buckets = map[string][2]int{}
	}
	key := strconv.FormatInt(at.Truncate(size).Unix(), 10)
	b := w.Buckets[key]
	b[1]++
	if passed {
		b[0]++
	}
	w.Buckets[key] = b
	oldest := now.Add(-window).Truncate(size).Unix()
	pass, n := 0, 0
	for k, b := range w.Buckets {
		start, err := strconv.ParseInt(k, 10, 64)
		if err != nil || start < oldest {
			delete(w.Buckets, k)
			continue
		}
		pass += b[0]
		n += b[1]
	}
	minPlans := r.MinPlans
	if minPlans == 0 {
		minPlans = DefaultMinPlans
	}
	rate := float64(pass) / float64(max(n, 1))
	threshold := *r.Threshold
	var typ EventType
	switch {
	case !w.Firing && n >= minPlans && rate < threshold:
		w.Firing, w.Incident, typ = true, now.UTC().Format(time.RFC3339Nano), PassRateBelow
	case w.Firing && n >= minPlans && rate >= threshold:
		// Back with as many plans as it takes to fire: one passing plan
		// after the failures left the window proves nothing.
		w.Firing, typ = false, PassRateRecovered
	default:
		return nil
	}
	rounded := math.Round(rate*1e6) / 1e6
	occ := &Occurrence{
		Event: Event{Type: typ, Timestamp: now.UTC().Format(time.RFC3339Nano), Data: EventData{AgentID: agent,
			PassRate: &rounded, Plans: n, Threshold: threshold, Window: r.Window, CriterionID: r.CriterionID}},
		Key:      fmt.Sprintf("%s\x00%s\x00%s\x00%s", typ, agent, ruleID, w.Incident),
		Incident: "PR#" + ruleID + "#" + w.Incident,
	}
	w.Pending = occ
	return occ
}
