package alert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// Limits of an agent's rules.
const (
	MaxRules        = 20
	MaxRuleChannels = 10
	MaxRuleFilters  = 50
	// MaxCooldown bounds a rule's cooldown.
	MaxCooldown = 7 * 24 * time.Hour
)

// Rule sends the events named in On to Channels, optionally only for
// expectations of the listed Kinds and lapses of the listed Lapses, and at
// most once per Cooldown (ISO 8601).
type Rule struct {
	On       []EventType `json:"on"`
	Channels []string    `json:"channels"`
	Kinds    []string    `json:"kinds,omitempty"`
	Lapses   []string    `json:"lapses,omitempty"`
	Cooldown string      `json:"cooldown,omitempty"`
	// Before is how long before an expectation's due time its
	// expectation.due_soon reminder is sent (required with that event).
	Before string `json:"before,omitempty"`
	// Repeat sends the lapse's notification again while the expectation
	// stays lapsed and unacknowledged (with expectation.lapsed).
	Repeat *Repeat `json:"repeat,omitempty"`
	// Escalate tells more channels when nobody acknowledged the lapse (nor
	// did a fact satisfy it) after each step's After (with
	// expectation.lapsed).
	Escalate []EscalationStep `json:"escalate,omitempty"`
	// Threshold, Window, MinPlans and CriterionID make a pass-rate rule
	// (with evaluation.pass_rate_below, passrate.go): alert when, over
	// Window (ISO 8601), fewer than Threshold of at least MinPlans
	// completed VERIFYs passed (of CriterionID's grades, when set).
	Threshold   *float64 `json:"threshold,omitempty"`
	Window      string   `json:"window,omitempty"`
	MinPlans    int      `json:"minPlans,omitempty"`
	CriterionID string   `json:"criterionId,omitempty"`
}

// Repeat is a rule's repeat: every Every after the last notification was
// delivered, at most Max times.
type Repeat struct {
	Every string `json:"every"`
	Max   int    `json:"max"`
}

// EscalationStep is one step of a rule's escalation.
type EscalationStep struct {
	After    string   `json:"after"`
	Channels []string `json:"channels"`
}

// Rules are an agent's alert rules, as PUT and GET carry them.
type Rules struct {
	AgentID   string `json:"agentId"`
	Rules     []Rule `json:"rules"`
	UpdatedAt string `json:"updatedAt,omitempty"`
	// ByOperator says the rules were written by an operator's token
	// (acting for every agent), which may name the operator's channels
	// that are not shared.
	ByOperator bool `json:"byOperator,omitempty"`
}

// ParseRules validates a PUT body against the channels the caller may use
// for agent (usable reports whether an id names one). Errors: an Invalid
// error naming each failing field (an unknown channel or event type
// among them).
func ParseRules(agent string, body []byte, usable func(channelID string) bool) (Rules, error) {
	var in struct {
		Rules []Rule `json:"rules"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Rules{}, errs.Fields("the body is not a list of rules", []errs.FieldError{{Path: "body", Message: jsonMessage(err)}})
	}
	var c errs.Collector
	if in.Rules == nil {
		c.Add("rules", "is required (an empty list removes every rule)")
	}
	if len(in.Rules) > MaxRules {
		c.Add("rules", "has more than %d rules", MaxRules)
	}
	for i, r := range in.Rules {
		p := fmt.Sprintf("rules[%d]", i)
		if len(r.On) == 0 {
			c.Add(p+".on", "is required: at least one event type")
		}
		for j, t := range r.On {
			if !ValidEvent(t) {
				c.Add(fmt.Sprintf("%s.on[%d]", p, j), "unknown event type %q (one of %s)", t, eventList())
			}
		}
		switch {
		case len(r.Channels) == 0:
			c.Add(p+".channels", "is required: at least one channel")
		case len(r.Channels) > MaxRuleChannels:
			c.Add(p+".channels", "has more than %d channels", MaxRuleChannels)
		}
		for j, ch := range r.Channels {
			if !usable(ch) {
				c.Add(fmt.Sprintf("%s.channels[%d]", p, j), "unknown channel %q", ch)
			}
		}
		if len(r.Kinds) > MaxRuleFilters {
			c.Add(p+".kinds", "has more than %d kinds", MaxRuleFilters)
		}
		dup := func(field string, xs []string) {
			seen := map[string]bool{}
			for j, x := range xs {
				if seen[x] {
					c.Add(fmt.Sprintf("%s.%s[%d]", p, field, j), "%q is listed twice", x)
				}
				seen[x] = true
			}
		}
		on := make([]string, len(r.On))
		for j, t := range r.On {
			on[j] = string(t)
		}
		dup("on", on)
		dup("channels", r.Channels)
		dup("kinds", r.Kinds)
		dup("lapses", r.Lapses)
		for j, l := range r.Lapses {
			if !slices.Contains(expect.LapseKinds, expect.LapseKind(l)) {
				c.Add(fmt.Sprintf("%s.lapses[%d]", p, j), "unknown lapse %q (one of overdue, skipped, stalled, refuted)", l)
			}
		}
		if r.Cooldown != "" {
			if _, err := parseCooldown(r.Cooldown); err != nil {
				c.Add(p+".cooldown", "%s", err.Error())
			}
		}
		checkFollowUps(&c, p, r, usable)
		checkPassRate(&c, p, r)
	}
	if len(c.List) > 0 {
		return Rules{}, c.Err("the rules are not valid")
	}
	if in.Rules == nil {
		in.Rules = []Rule{}
	}
	return Rules{AgentID: agent, Rules: in.Rules}, nil
}

// eventList names RuleEvents for messages.
func eventList() string {
	names := make([]string, len(RuleEvents))
	for i, e := range RuleEvents {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// checkFollowUps validates a rule's before, repeat and escalate.
func checkFollowUps(c *errs.Collector, p string, r Rule, usable func(string) bool) {
	dueSoon, lapsed := slices.Contains(r.On, DueSoon), slices.Contains(r.On, Lapsed)
	switch {
	case dueSoon && r.Before == "":
		c.Add(p+".before", "is required with expectation.due_soon: how long before the due time to remind (e.g. PT30M)")
	case !dueSoon && r.Before != "":
		c.Add(p+".before", "goes with expectation.due_soon in on")
	case r.Before != "":
		if _, err := parseSpan(r.Before, time.Second, MaxBefore); err != nil {
			c.Add(p+".before", "%s", err.Error())
		}
	}
	if r.Repeat != nil {
		if !lapsed {
			c.Add(p+".repeat", "goes with expectation.lapsed in on (it repeats the lapse)")
		}
		if _, err := parseSpan(r.Repeat.Every, minRepeat, MaxCooldown); err != nil {
			c.Add(p+".repeat.every", "%s", err.Error())
		}
		if r.Repeat.Max < 1 || r.Repeat.Max > MaxRepeats {
			c.Add(p+".repeat.max", "must be from 1 to %d", MaxRepeats)
		}
	}
	if len(r.Escalate) > 0 && !lapsed {
		c.Add(p+".escalate", "goes with expectation.lapsed in on (it escalates the lapse)")
	}
	if len(r.Escalate) > MaxEscalationSteps {
		c.Add(p+".escalate", "has more than %d steps", MaxEscalationSteps)
	}
	for i, st := range r.Escalate {
		sp := fmt.Sprintf("%s.escalate[%d]", p, i)
		if _, err := parseSpan(st.After, time.Second, MaxCooldown); err != nil {
			c.Add(sp+".after", "%s", err.Error())
		}
		switch {
		case len(st.Channels) == 0:
			c.Add(sp+".channels", "is required: at least one channel")
		case len(st.Channels) > MaxRuleChannels:
			c.Add(sp+".channels", "has more than %d channels", MaxRuleChannels)
		}
		seen := map[string]bool{}
		for j, ch := range st.Channels {
			switch {
			case seen[ch]:
				c.Add(fmt.Sprintf("%s.channels[%d]", sp, j), "%q is listed twice", ch)
			case !usable(ch):
				c.Add(fmt.Sprintf("%s.channels[%d]", sp, j), "unknown channel %q", ch)
			}
			seen[ch] = true
		}
	}
}

// BeforeOf returns r's reminder lead (zero: none).
func (r Rule) BeforeOf() time.Duration {
	d, _ := parseSpan(r.Before, time.Second, MaxBefore)
	return d
}

// AfterOf returns the wait of escalation step st.
func (st EscalationStep) AfterOf() time.Duration {
	d, _ := parseSpan(st.After, time.Second, MaxCooldown)
	return d
}

func parseCooldown(s string) (time.Duration, error) {
	d, err := expect.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d.Years != 0 || d.Months != 0 {
		return 0, fmt.Errorf("must be in weeks, days, hours, minutes or seconds")
	}
	if d.Weeks > 1 || d.Days > 7 || d.Clock > MaxCooldown { // each part first: the sum cannot wrap
		return 0, fmt.Errorf("must be more than zero and at most P7D")
	}
	total := time.Duration(d.Weeks)*7*24*time.Hour + time.Duration(d.Days)*24*time.Hour + d.Clock
	if total <= 0 || total > MaxCooldown {
		return 0, fmt.Errorf("must be more than zero and at most P7D")
	}
	return total, nil
}

// CooldownOf returns r's cooldown (zero: none).
func (r Rule) CooldownOf() time.Duration {
	if r.Cooldown == "" {
		return 0
	}
	d, _ := parseCooldown(r.Cooldown)
	return d
}

// ID names a rule by its content, so a cooldown's state follows the rule
// and not its position in the list.
func (r Rule) ID() string {
	b, _ := json.Marshal(r)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Matches reports whether r sends occ.
func (r Rule) Matches(occ Occurrence) bool {
	on := slices.Contains(r.On, occ.Event.Type) ||
		occ.Event.Type == Acknowledged && slices.Contains(r.On, Lapsed) || // where the lapse went
		occ.Event.Type == PassRateRecovered && slices.Contains(r.On, PassRateBelow)
	if !on {
		return false
	}
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, occ.About.Kind) {
		return false
	}
	// A reminder comes before any lapse: the lapse filter is not its.
	if len(r.Lapses) > 0 && occ.Event.Type != DueSoon && !slices.Contains(r.Lapses, occ.About.Lapse) {
		return false
	}
	return true
}

// Cooldown is the state of one rule's cooldown for one agent: until when
// it holds events back, how many it held, and the keys of the recent
// occurrences it decided on (so a replayed change decides nothing twice).
type Cooldown struct {
	Until string   `json:"until,omitempty"`
	Held  int      `json:"held,omitempty"`
	Seen  []string `json:"seen,omitempty"`
}

// maxSeen bounds the occurrence keys a cooldown remembers.
const maxSeen = 64

// Admit decides whether rule r (with cooldown d) sends occurrence key at
// now: it returns whether to send and how many held-back events the sent
// one reports. A key already decided on is neither sent nor counted again.
func (cd *Cooldown) Admit(key string, d time.Duration, now time.Time) (send bool, heldBack int, changed bool) {
	if slices.Contains(cd.Seen, key) {
		return false, 0, false
	}
	cd.Seen = append(cd.Seen, key)
	if len(cd.Seen) > maxSeen {
		cd.Seen = cd.Seen[len(cd.Seen)-maxSeen:]
	}
	if until, err := time.Parse(time.RFC3339Nano, cd.Until); err == nil && now.Before(until) {
		cd.Held++
		return false, 0, true
	}
	held := cd.Held
	cd.Held = 0
	cd.Until = expect.FormatTime(now.Add(d))
	return true, held, true
}
