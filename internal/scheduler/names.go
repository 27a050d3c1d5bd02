package scheduler

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

var nameEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// stampLayout is the fire time as written into a schedule name.
const stampLayout = "20060102T150405Z"

// Name returns the schedule name of an instant: "cw-", the initial of its
// kind (d, g or h), the fire time (the instant rounded up to the second, in
// UTC, as 20060102T150405Z), and lowercase base32 of the SHA-256 of
// (agentId, expectationId, kind, at to the nanosecond) truncated so that the
// name is MaxNameLen characters long (42 characters, 210 bits, for years
// 0000 to 9999). The name is deterministic, depends on nothing else, and
// uses only [0-9a-z-TZ]. The readable fire time lets Due skip schedules
// that are not yet due without reading them.
func Name(in expect.Instant) string { return NameAt(in, fireTime(in.At)) }

// NameAt is Name with the given fire time (the schedule's at() time) in
// place of the instant rounded up to the second: the name of a schedule
// set for fire. With a timer queue the Clock sets schedules before their
// instants (see Clock.FireTime).
func NameAt(in expect.Instant, fire time.Time) string {
	at := in.At.UTC()
	prefix := "cw-" + kindInitial(in.Kind) + "-" + fire.UTC().Format(stampLayout) + "-"
	key, _ := json.Marshal([]string{in.AgentID, in.ExpectationID, string(in.Kind), at.Format(time.RFC3339Nano)})
	sum := sha256.Sum256(key)
	h := strings.ToLower(nameEncoding.EncodeToString(sum[:]))
	return prefix + h[:MaxNameLen-len(prefix)]
}

func kindInitial(k expect.InstantKind) string {
	switch k {
	case expect.InstantDue:
		return "d"
	case expect.InstantGrace:
		return "g"
	case expect.InstantHorizon:
		return "h"
	}
	if k != "" {
		if b := k[0] | 0x20; b >= 'a' && b <= 'z' {
			return string(rune(b))
		}
	}
	return "x"
}

// fireTime rounds t up to the whole second, so that a schedule never fires
// before its instant.
func fireTime(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// expression returns the at() expression (in Timezone) of a fire time
// (whole seconds).
func expression(fire time.Time) string {
	return "at(" + fire.UTC().Format("2006-01-02T15:04:05") + ")"
}

// parseExpression returns the time of an at() expression in the named time
// zone (UTC when empty).
func parseExpression(expr, tz string) (time.Time, bool) {
	inner, ok := strings.CutPrefix(expr, "at(")
	if !ok {
		return time.Time{}, false
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return time.Time{}, false
	}
	loc := time.UTC
	if tz != "" && tz != "UTC" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return time.Time{}, false
		}
		loc = l
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", inner, loc)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}
