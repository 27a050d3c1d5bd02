package alert

import (
	"errors"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

// TestRecurringWindowAcrossAWeek: Saturdays 02:00 for 4 h in Riga,
// checked every 10 minutes of a simulated week, and across both daylight
// saving changes (the window starts at 02:00 by the wall clock, whatever
// the UTC offset).
func TestRecurringWindowAcrossAWeek(t *testing.T) {
	riga, err := time.LoadLocation("Europe/Riga")
	if err != nil {
		t.Fatalf("no time zone database: %v", err) // Go's own lib/time/zoneinfo.zip serves when the system has none
	}
	s, err := ParseSilence("sat", []byte(`{"matchers":{},"cron":"0 2 * * 6","timezone":"Europe/Riga","duration":"PT4H"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, week := range []time.Time{
		time.Date(2026, 12, 7, 0, 0, 0, 0, riga),  // winter (UTC+2)
		time.Date(2026, 7, 6, 0, 0, 0, 0, riga),   // summer (UTC+3)
		time.Date(2027, 3, 22, 0, 0, 0, 0, riga),  // the week the clocks go forward (Sunday 28th)
		time.Date(2026, 10, 19, 0, 0, 0, 0, riga), // the week they go back (Sunday 25th)
	} {
		active := 0
		for at := week; at.Before(week.AddDate(0, 0, 7)); at = at.Add(10 * time.Minute) {
			local := at.In(riga)
			want := local.Weekday() == time.Saturday && local.Hour() >= 2 && local.Hour() < 6
			if got := s.ActiveAt(at); got != want {
				t.Fatalf("week of %s: at %s active %v, want %v", week.Format("2006-01-02"), local, got, want)
			}
			if want {
				active++
			}
		}
		if active != 24 {
			t.Fatalf("week of %s: active %d ten-minute steps, want 24", week.Format("2006-01-02"), active)
		}
	}
}

func TestOneOffSilence(t *testing.T) {
	s, err := ParseSilence("x", []byte(`{"matchers":{"agentId":"a","kinds":["payment"],"subjectType":"invoice","subjectIdPrefix":"EU-"},"startsAt":"2026-12-06T10:00:00Z","endsAt":"2026-12-06T12:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	for _, c := range []struct {
		t    string
		want bool
	}{{"2026-12-06T09:59:59Z", false}, {"2026-12-06T10:00:00Z", true}, {"2026-12-06T11:59:59Z", true}, {"2026-12-06T12:00:00Z", false}} {
		if got := s.ActiveAt(at(c.t)); got != c.want {
			t.Errorf("%s: %v", c.t, got)
		}
	}
	if !s.Over(at("2026-12-06T12:00:00Z")) || s.Over(at("2026-12-06T11:00:00Z")) {
		t.Error("Over")
	}
	for _, c := range []struct {
		agent string
		about Subject
		want  bool
	}{
		{"a", Subject{Kind: "payment", SubjectType: "invoice", SubjectID: "EU-1"}, true},
		{"b", Subject{Kind: "payment", SubjectType: "invoice", SubjectID: "EU-1"}, false},
		{"a", Subject{Kind: "shipment", SubjectType: "invoice", SubjectID: "EU-1"}, false},
		{"a", Subject{Kind: "payment", SubjectType: "order", SubjectID: "EU-1"}, false},
		{"a", Subject{Kind: "payment", SubjectType: "invoice", SubjectID: "US-1"}, false},
	} {
		if got := s.Matches(c.agent, c.about); got != c.want {
			t.Errorf("%s %+v: %v", c.agent, c.about, got)
		}
	}
}

func TestParseSilenceRefusals(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"startsAt":"2026-12-06T10:00:00Z","endsAt":"2026-12-06T12:00:00Z"}`, "matchers"},
		{`{"matchers":{},"startsAt":"2026-12-06T12:00:00Z","endsAt":"2026-12-06T10:00:00Z"}`, "endsAt"},
		{`{"matchers":{},"startsAt":"tomorrow","endsAt":"2026-12-06T10:00:00Z"}`, "startsAt"},
		{`{"matchers":{}}`, "endsAt"},
		{`{"matchers":{},"cron":"0 2 * * 6","duration":"PT4H"}`, "timezone"},
		{`{"matchers":{},"cron":"0 2 * * 6","timezone":"Mars/Olympus","duration":"PT4H"}`, "timezone"},
		{`{"matchers":{},"cron":"@daily","timezone":"UTC","duration":"PT4H"}`, "cron"},
		{`{"matchers":{},"cron":"0 25 * * 6","timezone":"UTC","duration":"PT4H"}`, "cron"},
		{`{"matchers":{},"cron":"CRON_TZ=UTC 0 2 * * 6","timezone":"UTC","duration":"PT4H"}`, "cron"},
		{`{"matchers":{},"cron":"0 2 * * 6","timezone":"UTC","duration":"P8D"}`, "duration"},
		{`{"matchers":{},"cron":"0 2 * * 6","timezone":"UTC","duration":"PT4H","startsAt":"2026-12-06T10:00:00Z"}`, "cron"},
		{`{"matchers":{"agentId":""},"startsAt":"2026-12-06T10:00:00Z","endsAt":"2026-12-06T12:00:00Z","comment":"a\u0000b"}`, "comment"},
	} {
		_, err := ParseSilence("s", []byte(c.body))
		var e *errs.Error
		if !errors.As(err, &e) || !hasField(e, c.field) {
			t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.field)
		}
	}
}
