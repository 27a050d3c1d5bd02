package expect

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
)

// Acknowledge records that principal by acknowledged r's lapse at now,
// with an optional note, and reports whether r changed: an acknowledged
// lapse is answered as it is (the first acknowledgement stands). Errors:
// Conflict when r has not lapsed (there is nothing to acknowledge);
// Invalid naming "note" when the note is longer than MaxAckNoteLen
// characters or holds control characters other than line ends and tabs.
func Acknowledge(r *Record, by, note string, now time.Time) (bool, error) {
	if utf8.RuneCountInString(note) > MaxAckNoteLen || strings.IndexFunc(note, func(c rune) bool {
		return unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t'
	}) >= 0 {
		return false, errs.Fields("the acknowledgement is not valid", []errs.FieldError{{Path: "note",
			Message: "must be at most 1000 characters, without control characters other than line ends and tabs"}})
	}
	if r.Lapse == nil {
		return false, errs.E(errs.Conflict, "expectation %q has not lapsed; there is nothing to acknowledge", r.Expectation.ExpectationID)
	}
	if r.Ack != nil {
		return false, nil
	}
	r.Ack = &Ack{By: by, At: FormatTime(now), Note: note}
	return true, nil
}
