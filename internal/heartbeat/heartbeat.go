// Package heartbeat is the domain of recurring checks: a job or agent
// pings every period (or on a cron schedule in a time zone), and a period
// without a ping lapses like any expectation. Each period is an ordinary
// expectation of the agent (expectationId hb:<name>:<n>), so lapse tasks,
// alerts, the console and evidence treat it as any other. It does no I/O:
// the watcher loads a heartbeat and its current period, calls these pure
// functions with its clock, and commits what they return together.
package heartbeat

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// IDPrefix starts the expectation id of every heartbeat period; agents
// cannot raise ids with it themselves.
const IDPrefix = expect.HeartbeatIDPrefix

// MinEvery is the shortest period a heartbeat may have; MaxSpan the
// longest period or grace (a period's due time and grace end must stay
// within what an expectation may ask for).
const (
	MinEvery = time.Second
	MaxSpan  = 366 * 24 * time.Hour
)

// Spec is what a PUT of a heartbeat declares.
type Spec struct {
	Kind     string          `json:"kind"`
	Every    string          `json:"every,omitempty"`
	Cron     string          `json:"cron,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	Grace    string          `json:"grace,omitempty"`
	Subject  *expect.Subject `json:"subject,omitempty"`
	Expects  string          `json:"expects,omitempty"`
	Until    string          `json:"until,omitempty"`
}

// Heartbeat is the watcher's record of one heartbeat of an agent.
type Heartbeat struct {
	AgentID string `json:"agentId"`
	Name    string `json:"name"`
	Spec
	// Subject is the spec's, or the default one, always set.
	Subject expect.Subject `json:"subject"`
	Paused  bool           `json:"paused,omitempty"`
	// Deleted marks a heartbeat that was deleted: its record stays so
	// that a heartbeat put again under the name never reuses a period id.
	Deleted bool `json:"deleted,omitempty"`
	// Period is the number of the latest period raised (0: none yet), and
	// Current its expectation id.
	Period     int    `json:"period"`
	Current    string `json:"current,omitempty"`
	LastPingAt string `json:"lastPingAt,omitempty"`
	// StartedAt is set by a start signal while that run is on.
	StartedAt string `json:"startedAt,omitempty"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	Version   int64  `json:"-"`
}

// Status values of a heartbeat.
const (
	StatusNew     = "new"
	StatusUp      = "up"
	StatusStarted = "started"
	StatusLate    = "late"
	StatusDown    = "down"
	StatusPaused  = "paused"
)

// View is a heartbeat as the API answers it.
type View struct {
	Name       string         `json:"name"`
	Kind       string         `json:"kind"`
	Every      string         `json:"every,omitempty"`
	Cron       string         `json:"cron,omitempty"`
	Timezone   string         `json:"timezone,omitempty"`
	Grace      string         `json:"grace,omitempty"`
	Subject    expect.Subject `json:"subject"`
	Expects    string         `json:"expects,omitempty"`
	Until      string         `json:"until,omitempty"`
	Status     string         `json:"status"`
	LastPingAt string         `json:"lastPingAt,omitempty"`
	StartedAt  string         `json:"startedAt,omitempty"`
	NextDueAt  string         `json:"nextDueAt,omitempty"`
	// ExpectationID is the current period's expectation.
	ExpectationID string `json:"expectationId,omitempty"`
	Period        int    `json:"period"`
	CreatedAt     string `json:"createdAt"`
	UpdatedAt     string `json:"updatedAt"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports why name is not a heartbeat name ("" when it is): 1
// to 128 letters, digits, '.', '_' or '-', starting with a letter or digit,
// so that it reads well in a URL and in its periods' ids.
func ValidName(name string) string {
	if !nameRE.MatchString(name) {
		return "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	return ""
}

// Put validates spec against the agent's card and returns the heartbeat
// to store: a new one (old nil or deleted; the period count of a deleted
// one carries on) or old with the new spec (its open period keeps its
// due time; the next periods follow the new spec). Errors: Invalid naming
// each failing field.
func Put(old *Heartbeat, card expect.Card, agentID, name string, spec Spec, now time.Time) (*Heartbeat, error) {
	var c errs.Collector
	if msg := ValidName(name); msg != "" {
		c.Add("name", "%s", msg)
	}
	kind, ok := card.Kind(spec.Kind)
	switch {
	case spec.Kind == "":
		c.Add("kind", "is required (a kind declared on the agent card)")
	case !ok:
		c.Add("kind", "kind %q is not declared on the agent card", spec.Kind)
	}
	switch {
	case spec.Every == "" && spec.Cron == "":
		c.Add("every", "one of every (an ISO 8601 duration, e.g. PT5M) or cron (e.g. \"0 9 * * 1-5\") is required")
	case spec.Every != "" && spec.Cron != "":
		c.Add("cron", "give either every or cron, not both")
	case spec.Every != "":
		if d, err := expect.ParseDuration(spec.Every); err != nil {
			c.Add("every", "%s", err.Error())
		} else if span(d) < MinEvery {
			c.Add("every", "must be at least %s", MinEvery)
		} else if span(d) > MaxSpan {
			c.Add("every", "must be at most a year (P1Y)")
		}
		if spec.Timezone != "" {
			c.Add("timezone", "applies to cron only")
		}
	default:
		if _, err := ParseCron(spec.Cron, spec.Timezone); err != nil {
			field := "cron"
			if _, zerr := LoadZone(spec.Timezone); zerr != nil {
				field = "timezone"
			}
			c.Add(field, "%s", err.Error())
		}
	}
	if spec.Grace != "" {
		if d, err := expect.ParseDuration(spec.Grace); err != nil {
			c.Add("grace", "%s", err.Error())
		} else if span(d) > MaxSpan {
			c.Add("grace", "must be at most a year (P1Y)")
		}
	}
	subject := expect.Subject{Type: kind.SubjectType, ID: name}
	if spec.Subject != nil {
		subject = *spec.Subject
		if msg := expect.ValidID(subject.Type); msg != "" {
			c.Add("subject.type", "%s", msg)
		}
		if msg := expect.ValidID(subject.ID); msg != "" {
			c.Add("subject.id", "%s", msg)
		}
	}
	if len(spec.Expects) > expect.MaxTextLen {
		c.Add("expects", "is longer than %d bytes", expect.MaxTextLen)
	}
	if spec.Until != "" {
		if _, err := expect.ParseTime(spec.Until); err != nil {
			c.Add("until", "is not an RFC 3339 instant (e.g. 2026-12-31T00:00:00Z)")
		}
	}
	if err := c.Err("invalid heartbeat"); err != nil {
		return nil, err
	}
	hb := &Heartbeat{AgentID: agentID, Name: name, CreatedAt: expect.FormatTime(now)}
	if old != nil {
		hb.Version = old.Version
		hb.Period = old.Period
		if !old.Deleted {
			c := *old
			hb = &c
		}
	}
	hb.Spec = spec
	hb.Spec.Subject = nil
	hb.Subject = subject
	hb.UpdatedAt = expect.FormatTime(now)
	return hb, nil
}

// Same reports whether spec is what hb already holds (a PUT that changes
// nothing).
func (hb *Heartbeat) Same(spec Spec, card expect.Card) bool {
	subject := expect.Subject{ID: hb.Name}
	if k, ok := card.Kind(spec.Kind); ok {
		subject.Type = k.SubjectType
	}
	if spec.Subject != nil {
		subject = *spec.Subject
	}
	s := spec
	s.Subject = nil
	return !hb.Deleted && hb.Spec == s && hb.Subject == subject
}

// span is the length of an ISO 8601 duration from a fixed instant.
func span(d expect.Duration) time.Duration {
	base := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	return d.AddTo(base).Sub(base)
}

func (hb *Heartbeat) periodID(n int) string {
	return IDPrefix + hb.Name + ":" + strconv.Itoa(n)
}

// FailKey is the fact key that refutes period id (a fail signal).
func FailKey(periodID string) string { return periodID + ":fail" }

// PeriodNumber returns n of an expectation id hb:<name>:<n>, and false for
// any other id.
func PeriodNumber(id string) (name string, n int, ok bool) {
	rest, found := strings.CutPrefix(id, IDPrefix)
	i := strings.LastIndexByte(rest, ':')
	if !found || i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	return rest[:i], n, err == nil && n > 0
}

// nextDue returns when the period after a ping at now is due: every after
// now, or the schedule's next instant after now.
func (hb *Heartbeat) nextDue(now time.Time) time.Time {
	if hb.Cron != "" {
		c, err := ParseCron(hb.Cron, hb.Timezone)
		if err != nil {
			return time.Time{}
		}
		return c.Next(now)
	}
	d, err := expect.ParseDuration(hb.Every)
	if err != nil {
		return time.Time{}
	}
	return d.AddTo(now)
}

// runDue returns when a run started at now must have pinged: grace after
// the start, or, without a grace, one period after it (every, or the gap
// to the schedule's instant after its next one).
func (hb *Heartbeat) runDue(now time.Time) time.Time {
	if hb.Grace != "" {
		if d, err := expect.ParseDuration(hb.Grace); err == nil && span(d) > 0 {
			return d.AddTo(now)
		}
	}
	next := hb.nextDue(now)
	if hb.Cron != "" {
		if c, err := ParseCron(hb.Cron, hb.Timezone); err == nil {
			if after := c.Next(next); !after.IsZero() {
				return now.Add(after.Sub(next))
			}
		}
	}
	return next
}

func (hb *Heartbeat) schedule() string {
	if hb.Cron != "" {
		tz := hb.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("on cron %q in %s", hb.Cron, tz)
	}
	return "every " + hb.Every
}

// period returns the expectation of period n, due at due, with grace.
func (hb *Heartbeat) period(n int, due time.Time, grace string) expect.Expectation {
	id := hb.periodID(n)
	expects := hb.Expects
	if expects == "" {
		expects = fmt.Sprintf("heartbeat %s pings %s", hb.Name, hb.schedule())
	}
	return expect.Expectation{
		ExpectationID: id,
		Kind:          hb.Kind,
		Subject:       hb.Subject,
		Expects:       expects,
		SatisfiedBy:   expect.SatisfiedBy{FactKey: id},
		RefutedBy:     &expect.RefutedBy{FactKey: FailKey(id)},
		DueAt:         expect.FormatTime(due),
		Grace:         grace,
		Basis:         fmt.Sprintf("heartbeat %s: a ping is expected %s", hb.Name, hb.schedule()),
	}
}

// TaskID is the origin task id (and context id) of a heartbeat's periods:
// their lapse tasks continue it.
func (hb *Heartbeat) TaskID() string { return IDPrefix + hb.Name }

// RaiseRequest wraps the expectations of a heartbeat change as a raise of
// its agent (the kind's first skill, when the kind is bound to skills).
func (hb *Heartbeat) RaiseRequest(card expect.Card, e ...expect.Expectation) expect.RaiseRequest {
	req := expect.RaiseRequest{TaskID: hb.TaskID(), ContextID: hb.TaskID(), Expectations: e, Internal: true}
	if k, ok := card.Kind(hb.Kind); ok && len(k.Skills) > 0 {
		req.Skill = k.Skills[0]
	}
	return req
}

// after reports whether t is after the heartbeat's until (no period is
// raised due then).
func (hb *Heartbeat) after(t time.Time) bool {
	if hb.Until == "" {
		return false
	}
	u, err := expect.ParseTime(hb.Until)
	return err == nil && t.After(u)
}

// Signal is what a ping says.
type Signal string

// The signals of a ping.
const (
	Success Signal = "success"
	Start   Signal = "start"
	Fail    Signal = "fail"
)

// Change is what a heartbeat operation asks the watcher to commit: the
// heartbeat's new record, and in order a fact to apply (one that satisfies
// or refutes a period), periods to raise, and a period to withdraw.
type Change struct {
	Heartbeat *Heartbeat
	// Fact is to be applied to the period FactOn (after the raises).
	Fact   *expect.Fact
	FactOn string
	Raise  []expect.Expectation
	// Withdraw is the id of an open period to withdraw, with its reason.
	Withdraw, WithdrawReason string
}

// Ping applies a signal at now to hb, whose current period is cur (nil
// when there is none), from source (the authenticated caller):
//
//   - success satisfies the current period (a late fact when it lapsed:
//     alert rules see expectation.recovered) and raises the next one, due
//     every after now or at the schedule's next instant, unless that is
//     after until;
//   - start marks a run started: the open period is superseded by one due
//     grace after now (a run that does not ping in time lapses overdue);
//   - fail refutes the open period at once (lapse "refuted"); with none
//     open, a period is raised and refuted, so that the failure alerts.
//
// A ping resumes a paused heartbeat. Errors: NotFound for a deleted one.
func Ping(hb *Heartbeat, cur *expect.Record, sig Signal, source string, now time.Time, cfg expect.Config) (Change, error) {
	if hb == nil || hb.Deleted {
		return Change{}, errs.E(errs.NotFound, "no such heartbeat")
	}
	out := *hb
	out.Paused = false
	out.LastPingAt = expect.FormatTime(now)
	out.UpdatedAt = out.LastPingAt
	ch := Change{Heartbeat: &out}
	open := cur != nil && cur.State == expect.StateOpen
	fact := func(key string) *expect.Fact {
		return &expect.Fact{FactKey: key, ObservedAt: expect.FormatTime(now), Source: source}
	}
	until := hb.after
	next := func(due time.Time, grace string) expect.Expectation {
		out.Period++
		out.Current = out.periodID(out.Period)
		return out.period(out.Period, due, grace)
	}
	switch sig {
	case Success:
		if cur != nil && (open || cur.State == expect.StateLapsed && cur.SatisfiedBy == nil) {
			ch.Fact, ch.FactOn = fact(cur.Expectation.SatisfiedBy.FactKey), cur.Expectation.ExpectationID
		}
		out.StartedAt = ""
		if due := out.nextDue(now); !due.IsZero() && !until(due) {
			ch.Raise = append(ch.Raise, next(due, hb.Grace))
		}
	case Start:
		due := out.runDue(now)
		if until(due) {
			break // no period after until: the run is not watched
		}
		out.StartedAt = expect.FormatTime(now)
		e := next(due, "")
		if open {
			if cur.Lineage < cfg.MaxLineage {
				e.Supersedes = cur.Expectation.ExpectationID
			} else {
				ch.Withdraw, ch.WithdrawReason = cur.Expectation.ExpectationID, "a new run of heartbeat "+hb.Name+" started"
			}
		}
		ch.Raise = append(ch.Raise, e)
	case Fail:
		out.StartedAt = ""
		switch {
		case open:
			ch.Fact, ch.FactOn = fact(FailKey(cur.Expectation.ExpectationID)), cur.Expectation.ExpectationID
		case cur != nil && cur.State == expect.StateLapsed:
			// Down already: the failure is recorded, nothing lapses again.
		case until(now):
			// Past until: nothing is watched, so nothing lapses.
		default:
			e := next(now.Add(time.Second), hb.Grace)
			ch.Raise = append(ch.Raise, e)
			ch.Fact, ch.FactOn = fact(FailKey(e.ExpectationID)), e.ExpectationID
		}
	default:
		return Change{}, errs.E(errs.Invalid, "unknown signal %q", sig)
	}
	return ch, nil
}

// Pause stops hb from expecting pings: its open period is withdrawn.
// Pausing a paused heartbeat changes nothing.
func Pause(hb *Heartbeat, cur *expect.Record, now time.Time) Change {
	out := *hb
	ch := Change{Heartbeat: &out}
	if hb.Paused {
		return Change{}
	}
	out.Paused = true
	out.StartedAt = ""
	out.UpdatedAt = expect.FormatTime(now)
	if cur != nil && cur.State == expect.StateOpen {
		ch.Withdraw, ch.WithdrawReason = cur.Expectation.ExpectationID, "heartbeat "+hb.Name+" paused"
	}
	return ch
}

// Resume makes a paused heartbeat expect pings again: a period is raised
// at once, due as after a ping now. Resuming one that is not paused
// changes nothing.
func Resume(hb *Heartbeat, now time.Time) Change {
	if !hb.Paused {
		return Change{}
	}
	out := *hb
	out.Paused = false
	out.UpdatedAt = expect.FormatTime(now)
	ch := Change{Heartbeat: &out}
	if due := out.nextDue(now); !due.IsZero() && !out.after(due) {
		out.Period++
		out.Current = out.periodID(out.Period)
		ch.Raise = append(ch.Raise, out.period(out.Period, due, hb.Grace))
	}
	return ch
}

// Delete marks hb deleted (its record stays, so period ids are never
// reused) and withdraws its open period.
func Delete(hb *Heartbeat, cur *expect.Record, now time.Time) Change {
	out := *hb
	out.Deleted = true
	out.Paused = false
	out.StartedAt = ""
	out.UpdatedAt = expect.FormatTime(now)
	ch := Change{Heartbeat: &out}
	if cur != nil && cur.State == expect.StateOpen {
		ch.Withdraw, ch.WithdrawReason = cur.Expectation.ExpectationID, "heartbeat "+hb.Name+" deleted"
	}
	return ch
}

// Describe returns the view of hb with its current period cur (nil when
// none, or not found) at now.
func Describe(hb *Heartbeat, cur *expect.Record, now time.Time) View {
	v := View{Name: hb.Name, Kind: hb.Kind, Every: hb.Every, Cron: hb.Cron, Timezone: hb.Timezone, Grace: hb.Grace,
		Subject: hb.Subject, Expects: hb.Expects, Until: hb.Until, LastPingAt: hb.LastPingAt, StartedAt: hb.StartedAt,
		Period: hb.Period, ExpectationID: hb.Current, CreatedAt: hb.CreatedAt, UpdatedAt: hb.UpdatedAt}
	switch {
	case hb.Paused:
		v.Status = StatusPaused
	case cur == nil:
		v.Status = StatusNew
		if hb.LastPingAt != "" {
			v.Status = StatusUp
		}
	case cur.State == expect.StateOpen:
		v.NextDueAt = cur.DueAt
		due, _ := expect.ParseTime(cur.DueAt)
		switch {
		case hb.StartedAt != "" && !now.Before(due):
			v.Status = StatusLate
		case hb.StartedAt != "":
			v.Status = StatusStarted
		case cur.PastDue || !now.Before(due):
			v.Status = StatusLate
		default:
			v.Status = StatusUp
		}
	case cur.State == expect.StateLapsed && (cur.SatisfiedBy == nil || hb.LastPingAt == "" || !pingedAfterLapse(hb, cur)):
		v.Status = StatusDown
	default:
		v.Status = StatusUp
	}
	return v
}

// pingedAfterLapse reports whether the last ping came after cur lapsed
// (a success that did not raise a next period, past until).
func pingedAfterLapse(hb *Heartbeat, cur *expect.Record) bool {
	last, err1 := expect.ParseTime(hb.LastPingAt)
	lapsed, err2 := expect.ParseTime(cur.Lapse.LapsedAt)
	return err1 == nil && err2 == nil && last.After(lapsed)
}
