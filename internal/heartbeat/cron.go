package heartbeat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is a standard five-field cron schedule evaluated in a time zone,
// with daylight-saving changes handled as Debian's cron (and so
// Healthchecks.io's cronsim) does: a time that a change skips (clocks go
// forward) comes at the change itself, and a time that a change repeats
// (clocks go back) comes once, at its first occurrence, unless the
// schedule's hour field is "*" (an hourly or more frequent job, which
// runs in both occurrences of the hour).
type Cron struct {
	spec *cron.SpecSchedule
	loc  *time.Location
	// everyHour is true when the hour field matches every hour.
	everyHour bool
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses expr (five fields, or a descriptor such as @daily; not
// @every) in the IANA time zone tz ("" is UTC). The error says what is
// wrong, for the field that holds the expression.
func ParseCron(expr, tz string) (*Cron, error) {
	loc, err := LoadZone(tz)
	if err != nil {
		return nil, err
	}
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ=") {
		return nil, errors.New("names its time zone in the expression; give it in timezone instead")
	}
	if strings.HasPrefix(e, "@every") {
		return nil, errors.New("@every is not a cron schedule; use every instead")
	}
	if len(e) > 256 {
		return nil, errors.New("is longer than 256 bytes")
	}
	sched, err := cronParser.Parse(e)
	if err != nil {
		return nil, fmt.Errorf("is not a five-field cron expression (minute hour day-of-month month day-of-week): %v", err)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("is not a cron schedule")
	}
	c := &Cron{spec: spec, loc: loc, everyHour: spec.Hour&(1<<24-1) == 1<<24-1}
	// A schedule that never comes (30 February) is refused rather than
	// watched forever.
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("never comes (no date matches it)")
	}
	return c, nil
}

// LoadZone loads an IANA time zone by name ("" is UTC). The name "Local"
// is refused: the server's zone is not the caller's.
func LoadZone(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if tz == "Local" || len(tz) > 64 {
		return nil, fmt.Errorf("%q is not an IANA time zone name (e.g. Europe/Riga)", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name (e.g. Europe/Riga)", tz)
	}
	return loc, nil
}

// wall returns t's wall clock in the schedule's zone as a UTC time with
// the same fields, so that the schedule can be matched on it without the
// zone's changes.
func (c *Cron) wall(t time.Time) time.Time {
	l := t.In(c.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instants returns the instants at which the zone's clock shows wall
// (sorted): one, two when a change repeats it, and none when a change
// skips it, together with the instant of that change.
func (c *Cron) instants(wall time.Time) (at []time.Time, skippedTo time.Time) {
	guess := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, c.loc)
	start, end := guess.ZoneBounds()
	offsets := []int{}
	for _, t := range []time.Time{guess, start.Add(-time.Second), end} {
		if t.IsZero() {
			continue
		}
		_, off := t.In(c.loc).Zone()
		if !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	for _, off := range offsets {
		t := wall.Add(-time.Duration(off) * time.Second)
		if c.wall(t).Equal(wall) && !slices.ContainsFunc(at, t.Equal) {
			at = append(at, t)
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	if len(at) > 0 {
		return at, time.Time{}
	}
	// Skipped: the change lies between the instants the wall time would
	// have at the offsets on either side of it.
	lo, hi := time.Time{}, time.Time{}
	for _, off := range offsets {
		t := wall.Add(-time.Duration(off) * time.Second)
		if lo.IsZero() || t.Before(lo) {
			lo = t
		}
		if hi.IsZero() || t.After(hi) {
			hi = t
		}
	}
	for _, b := range []time.Time{start, end} {
		if !b.IsZero() && !b.Before(lo) && !b.After(hi) {
			return nil, b
		}
	}
	return nil, guess
}

// Next returns the first instant of the schedule after t, or the zero time
// when none comes within five years.
func (c *Cron) Next(t time.Time) time.Time {
	// Candidate wall times are taken in order from a little before t's
	// wall time (a repeated hour puts instants after t at earlier wall
	// times); the earliest instant after t wins, and the search stops
	// once the candidates are past any change's reach of it.
	const reach = 3 * time.Hour
	var best time.Time
	w := c.spec.Next(c.wall(t).Add(-reach))
	for i := 0; !w.IsZero() && i < 10000; i++ {
		if !best.IsZero() && w.After(c.wall(best).Add(reach)) {
			break
		}
		at, skippedTo := c.instants(w)
		if len(at) == 0 {
			at = []time.Time{skippedTo}
		} else if len(at) > 1 && !c.everyHour {
			at = at[:1]
		}
		for _, x := range at {
			if x.After(t) && (best.IsZero() || x.Before(best)) {
				best = x
			}
		}
		w = c.spec.Next(w)
	}
	return best.UTC()
}
