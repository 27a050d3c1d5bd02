package alert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// Silence holds back the notifications that match it while it is active:
// from StartsAt to EndsAt, or (a maintenance window) for Duration from
// each instant of Cron in Timezone. A notification held back is recorded
// as not sent (Notification.Skipped names the silence); a lapse's later
// repeats still go once the silence is over. Lapse tasks to agents are
// held back only when LapseTasks says so.
type Silence struct {
	ID       string   `json:"silenceId"`
	Matchers Matchers `json:"matchers"`
	StartsAt string   `json:"startsAt,omitempty"`
	EndsAt   string   `json:"endsAt,omitempty"`
	Cron     string   `json:"cron,omitempty"`
	Timezone string   `json:"timezone,omitempty"`
	Duration string   `json:"duration,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	// LapseTasks extends the silence to the lapse tasks sent to the
	// matched agents (recorded as suppressed, to be redelivered at will).
	LapseTasks bool `json:"lapseTasks,omitempty"`
	// Owners are the agents of the token that made it ("*": an
	// operator's), who may see, change and delete it.
	Owners    []string `json:"owners"`
	CreatedBy string   `json:"createdBy"`
	CreatedAt string   `json:"createdAt"`
	UpdatedAt string   `json:"updatedAt"`

	window *cronWindow
}

// Matchers say which events a silence holds back: all of them must match
// (an empty one matches anything).
type Matchers struct {
	AgentID         string   `json:"agentId,omitempty"`
	Kinds           []string `json:"kinds,omitempty"`
	SubjectType     string   `json:"subjectType,omitempty"`
	SubjectIDPrefix string   `json:"subjectIdPrefix,omitempty"`
}

// Limits of silences.
const (
	MaxSilenceComment  = 1000
	MaxSilenceDuration = 7 * 24 * time.Hour
	// MaxSilences bounds the silences a server keeps.
	MaxSilences = 1000
)

type cronWindow struct {
	sched cron.Schedule
	loc   *time.Location
	d     time.Duration
}

// silenceBody is the PUT body.
type silenceBody struct {
	Matchers   *Matchers `json:"matchers"`
	StartsAt   string    `json:"startsAt"`
	EndsAt     string    `json:"endsAt"`
	Cron       string    `json:"cron"`
	Timezone   string    `json:"timezone"`
	Duration   string    `json:"duration"`
	Comment    string    `json:"comment"`
	LapseTasks bool      `json:"lapseTasks"`
}

// ParseSilence validates a PUT body for silence id (without owners and
// times). Errors: an Invalid error naming each failing field.
func ParseSilence(id string, body []byte) (Silence, error) {
	var c errs.Collector
	if msg := ValidChannelID(id); msg != "" {
		c.Add("silenceId", "%s", msg)
	}
	var b silenceBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Silence{}, errs.Fields("the body is not a silence", []errs.FieldError{{Path: "body", Message: jsonMessage(err)}})
	}
	s := Silence{ID: id, StartsAt: b.StartsAt, EndsAt: b.EndsAt, Cron: b.Cron, Timezone: b.Timezone, Duration: b.Duration, Comment: b.Comment, LapseTasks: b.LapseTasks}
	if b.Matchers == nil {
		c.Add("matchers", "is required (an agentId, kinds, subjectType, subjectIdPrefix; {} matches everything an operator's token may silence)")
	} else {
		s.Matchers = *b.Matchers
		m := s.Matchers
		if m.AgentID != "" {
			if msg := expect.ValidID(m.AgentID); msg != "" {
				c.Add("matchers.agentId", "%s", msg)
			}
		}
		if len(m.Kinds) > MaxRuleFilters {
			c.Add("matchers.kinds", "has more than %d kinds", MaxRuleFilters)
		}
		for _, f := range []struct{ path, v string }{{"matchers.subjectType", m.SubjectType}, {"matchers.subjectIdPrefix", m.SubjectIDPrefix}} {
			if len(f.v) > 256 {
				c.Add(f.path, "is longer than 256 bytes")
			}
		}
	}
	if utf8.RuneCountInString(b.Comment) > MaxSilenceComment || strings.IndexFunc(b.Comment, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }) >= 0 {
		c.Add("comment", "must be at most %d characters, without control characters other than line ends and tabs", MaxSilenceComment)
	}
	oneOff := b.StartsAt != "" || b.EndsAt != ""
	recurring := b.Cron != "" || b.Timezone != "" || b.Duration != ""
	switch {
	case oneOff && recurring:
		c.Add("cron", "a silence is either startsAt and endsAt, or a recurring window (cron, timezone, duration), not both")
	case oneOff:
		start, err1 := expect.ParseTime(b.StartsAt)
		if err1 != nil {
			c.Add("startsAt", "must be an RFC 3339 time")
		}
		end, err2 := expect.ParseTime(b.EndsAt)
		if err2 != nil {
			c.Add("endsAt", "must be an RFC 3339 time")
		}
		if err1 == nil && err2 == nil && !end.After(start) {
			c.Add("endsAt", "must be after startsAt")
		}
	case recurring:
		w, err := newCronWindow(b.Cron, b.Timezone, b.Duration)
		if err != nil {
			c.Add(err.path, "%s", err.msg)
		}
		s.window = w
	default:
		c.Add("endsAt", "is required: startsAt and endsAt, or a recurring window (cron, timezone, duration)")
	}
	if len(c.List) > 0 {
		return Silence{}, c.Err("the silence is not valid")
	}
	return s, nil
}

type fieldErr struct{ path, msg string }

// newCronWindow parses a recurring window: five cron fields, an IANA time
// zone, and how long each window lasts.
func newCronWindow(spec, tz, dur string) (*cronWindow, *fieldErr) {
	if tz == "" {
		return nil, &fieldErr{"timezone", "is required with cron (an IANA zone such as Europe/Riga, or UTC)"}
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.ContainsAny(tz, " ") {
		return nil, &fieldErr{"timezone", "is not a time zone this server knows (an IANA name such as Europe/Riga)"}
	}
	if strings.Contains(spec, "TZ=") || len(strings.Fields(spec)) != 5 {
		return nil, &fieldErr{"cron", "must be five fields: minute hour day-of-month month day-of-week"}
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, &fieldErr{"cron", "is not a cron expression: " + err.Error()}
	}
	d, err := parseSpan(dur, time.Minute, MaxSilenceDuration)
	if err != nil {
		return nil, &fieldErr{"duration", err.Error()}
	}
	return &cronWindow{sched: sched, loc: loc, d: d}, nil
}

// Compile prepares a stored silence's window once, so that ActiveAt, which
// may then be called from several goroutines, only reads it (stored
// silences were validated when they were put).
func (s *Silence) Compile() {
	if s.Cron != "" && s.window == nil {
		s.window, _ = newCronWindow(s.Cron, s.Timezone, s.Duration)
	}
}

// ActiveAt reports whether s holds notifications back at t: between
// StartsAt (included) and EndsAt, or within Duration of an instant of its
// cron in its time zone (a window that has begun: daylight saving moves
// the instants as the wall clock says).
func (s *Silence) ActiveAt(t time.Time) bool {
	if s.Cron != "" {
		w := s.window
		if w == nil { // not compiled: worked out here, kept nowhere
			w, _ = newCronWindow(s.Cron, s.Timezone, s.Duration)
		}
		if w == nil {
			return false
		}
		// The first instant after t - d starts the only window that can
		// hold t.
		start := w.sched.Next(t.Add(-w.d).In(w.loc))
		return !start.IsZero() && !start.After(t)
	}
	start, err1 := expect.ParseTime(s.StartsAt)
	end, err2 := expect.ParseTime(s.EndsAt)
	return err1 == nil && err2 == nil && !t.Before(start) && t.Before(end)
}

// Over reports whether a one-off silence has ended by t (a recurring one
// never is).
func (s *Silence) Over(t time.Time) bool {
	if s.Cron != "" {
		return false
	}
	end, err := expect.ParseTime(s.EndsAt)
	return err == nil && !t.Before(end)
}

// Matches reports whether s holds back an event of agent about what.
func (s *Silence) Matches(agent string, about Subject) bool {
	m := s.Matchers
	switch {
	case m.AgentID != "" && m.AgentID != agent:
		return false
	case len(m.Kinds) > 0 && !slices.Contains(m.Kinds, about.Kind):
		return false
	case m.SubjectType != "" && m.SubjectType != about.SubjectType:
		return false
	case m.SubjectIDPrefix != "" && !strings.HasPrefix(about.SubjectID, m.SubjectIDPrefix):
		return false
	}
	return true
}

// VisibleTo reports whether a principal acting for agents may see s: an
// operator sees all; another principal those it made, and those that
// silence one of its agents.
func (s *Silence) VisibleTo(agents []string) bool {
	if slices.Contains(agents, "*") || slices.Contains(agents, s.Matchers.AgentID) {
		return true
	}
	for _, o := range s.Owners {
		if o != "*" && slices.Contains(agents, o) {
			return true
		}
	}
	return false
}

// ManageableBy reports whether a principal acting for agents may replace
// or delete s: an operator, or one acting for every owner.
func (s *Silence) ManageableBy(agents []string) bool {
	if slices.Contains(agents, "*") {
		return true
	}
	for _, o := range s.Owners {
		if o == "*" || !slices.Contains(agents, o) {
			return false
		}
	}
	return len(s.Owners) > 0
}

// String names s for a skipped notification.
func (s *Silence) String() string { return fmt.Sprintf("silenced by %s", s.ID) }
