package expect

import (
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

func TestAcknowledge(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	lapsed := func() *Record {
		return &Record{Expectation: Expectation{ExpectationID: "e"}, Lapse: &Lapse{Lapse: Overdue, LapsedAt: "2026-12-06T08:00:00Z"}}
	}
	acked := lapsed()
	acked.Ack = &Ack{By: "first", At: "2026-12-06T08:30:00Z"}
	for _, c := range []struct {
		name    string
		r       *Record
		note    string
		changed bool
		code    errs.Code
		want    *Ack
	}{
		{"a lapse", lapsed(), "looking", true, "", &Ack{By: "alice", At: "2026-12-06T09:00:00Z", Note: "looking"}},
		{"without a note", lapsed(), "", true, "", &Ack{By: "alice", At: "2026-12-06T09:00:00Z"}},
		{"twice: the first stands", acked, "again", false, "", &Ack{By: "first", At: "2026-12-06T08:30:00Z"}},
		{"not lapsed", &Record{Expectation: Expectation{ExpectationID: "e"}}, "", false, errs.Conflict, nil},
		{"note too long", lapsed(), strings.Repeat("é", MaxAckNoteLen+1), false, errs.Invalid, nil},
		{"control character", lapsed(), "a\x00b", false, errs.Invalid, nil},
		{"line ends allowed", lapsed(), "a\r\nb\tc", true, "", &Ack{By: "alice", At: "2026-12-06T09:00:00Z", Note: "a\r\nb\tc"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed, err := Acknowledge(c.r, "alice", c.note, now)
			if errs.CodeOf(err) != c.code && !(c.code == "" && err == nil) {
				t.Fatalf("error %v, want code %q", err, c.code)
			}
			if changed != c.changed {
				t.Fatalf("changed %v, want %v", changed, c.changed)
			}
			if c.want != nil && (c.r.Ack == nil || *c.r.Ack != *c.want) {
				t.Fatalf("ack %+v, want %+v", c.r.Ack, c.want)
			}
			if c.code != "" && c.r.Ack != nil && c.r != acked {
				t.Fatalf("a refused acknowledgement changed the record: %+v", c.r.Ack)
			}
		})
	}
}
