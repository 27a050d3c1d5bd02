package heartbeat

import (
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// TestCronAcrossDaylightSaving: the schedule's instants in two zones
// across both changes of 2026, as Debian's cron (and Healthchecks.io)
// runs them: a skipped time comes at the change, a repeated one once,
// an hourly or more frequent schedule runs in both occurrences.
func TestCronAcrossDaylightSaving(t *testing.T) {
	cases := []struct {
		name, expr, tz string
		from           string
		want           []string
	}{
		{"New York, a time the spring change skips", "30 2 * * *", "America/New_York", "2026-03-07T17:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"New York, a time the autumn change repeats", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"New York, every 30 minutes through the repeated hour", "*/30 * * * *", "America/New_York", "2026-11-01T04:45:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"}},
		{"New York, every 30 minutes through the skipped hour", "*/30 * * * *", "America/New_York", "2026-03-08T06:15:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		{"Riga, weekdays at 9 across the spring change", "0 9 * * 1-5", "Europe/Riga", "2026-03-26T08:00:00Z",
			[]string{"2026-03-27T07:00:00Z", "2026-03-30T06:00:00Z", "2026-03-31T06:00:00Z"}},
		{"Riga, a time the spring change skips", "30 3 * * *", "Europe/Riga", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Riga, a time the autumn change repeats", "15 3 * * *", "Europe/Riga", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:15:00Z", "2026-10-26T01:15:00Z"}},
		{"UTC by default", "0 0 1 * *", "", "2026-12-06T10:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"}},
		{"a descriptor", "@daily", "Europe/Riga", "2026-12-06T10:00:00Z",
			[]string{"2026-12-06T22:00:00Z", "2026-12-07T22:00:00Z"}},
	}
	for _, c := range cases {
		cr, err := ParseCron(c.expr, c.tz)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		at := utc(c.from)
		for i, w := range c.want {
			at = cr.Next(at)
			if !at.Equal(utc(w)) {
				t.Errorf("%s: instant %d = %s, want %s", c.name, i, at.Format(time.RFC3339), w)
				break
			}
		}
	}
}

func TestParseCronRefuses(t *testing.T) {
	for _, c := range []struct{ expr, tz string }{
		{"CRON_TZ=Europe/Riga 0 9 * * *", ""},
		{"TZ=UTC 0 9 * * *", ""},
		{"@every 5m", ""},
		{"61 * * * *", ""},
		{"0 9 * *", ""},
		{"0 0 9 * * *", ""},
		{"0 0 30 2 *", ""},
		{"0 9 * * *", "Mars/Olympus"},
		{"0 9 * * *", "Local"},
	} {
		if _, err := ParseCron(c.expr, c.tz); err == nil {
			t.Errorf("ParseCron(%q, %q) accepted it", c.expr, c.tz)
		}
	}
}

// FuzzParseCron: no expression or zone panics the parser, and a schedule
// it accepts comes after any instant it is asked about (or never within
// five years), in order.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/15 * * * *", "30 2 * * *", "@daily", "0 0 29 2 *", "5-55/10 1,2 */3 JAN-DEC MON-FRI", "* * * * *"} {
		f.Add(s, "America/New_York", int64(1772960400))
	}
	f.Fuzz(func(t *testing.T, expr, tz string, at int64) {
		c, err := ParseCron(expr, tz)
		if err != nil {
			return
		}
		from := time.Unix(at%(4<<30), 0).UTC()
		next := c.Next(from)
		if next.IsZero() {
			return
		}
		if !next.After(from) {
			t.Fatalf("%q in %q: Next(%v) = %v, not after it", expr, tz, from, next)
		}
		if again := c.Next(next); !again.IsZero() && !again.After(next) {
			t.Fatalf("%q in %q: Next(%v) = %v, not after it", expr, tz, next, again)
		}
	})
}
