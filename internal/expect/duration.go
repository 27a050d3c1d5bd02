package expect

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Duration is an ISO 8601 duration (PnYnMnWnDTnHnMnS). Years, months, weeks
// and days are calendar units, added in UTC with time.AddDate; hours,
// minutes and seconds are exact.
type Duration struct {
	Years, Months, Weeks, Days int
	Clock                      time.Duration
}

// maxDurationComponent bounds each numeric component; maxClock bounds the
// exact part so that no duration overflows time arithmetic.
const (
	maxDurationComponent = 1_000_000_000
	maxClock             = 200 * 366 * 24 * time.Hour
)

// ParseDuration parses an ISO 8601 duration such as "PT2H", "P1DT12H",
// "P2W" or "PT0.5S". Negative durations and empty designators ("P", "PT")
// are errors. Only the seconds component may be fractional.
func ParseDuration(s string) (Duration, error) {
	var d Duration
	if len(s) < 2 || s[0] != 'P' || len(s) > 64 {
		return d, fmt.Errorf("not an ISO 8601 duration (expected e.g. PT2H or P1D): %q", s)
	}
	rest := s[1:]
	inTime := false
	seen := 0
	order := "YMWD"
	for len(rest) > 0 {
		if rest[0] == 'T' {
			if inTime {
				return d, fmt.Errorf("duplicate T in duration %q", s)
			}
			inTime = true
			order = "HMS"
			rest = rest[1:]
			if rest == "" {
				return d, fmt.Errorf("empty time part in duration %q", s)
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.' || rest[i] == ',') {
			i++
		}
		if i == 0 || i == len(rest) {
			return d, fmt.Errorf("malformed duration %q", s)
		}
		num, unit := rest[:i], rest[i]
		rest = rest[i+1:]
		pos := -1
		for j := 0; j < len(order); j++ {
			if order[j] == unit {
				pos = j
			}
		}
		if pos < 0 {
			return d, fmt.Errorf("unexpected designator %q in duration %q", unit, s)
		}
		order = order[pos+1:]
		seen++
		frac := unit == 'S' && inTime
		if !frac {
			n, err := strconv.Atoi(num)
			if err != nil || n > maxDurationComponent {
				return d, fmt.Errorf("bad number %q in duration %q", num, s)
			}
			switch {
			case !inTime && unit == 'Y':
				d.Years = n
			case !inTime && unit == 'M':
				d.Months = n
			case !inTime && unit == 'W':
				d.Weeks = n
			case !inTime && unit == 'D':
				d.Days = n
			case unit == 'H':
				if n > int(maxClock/time.Hour) {
					return d, fmt.Errorf("duration %q is too long", s)
				}
				d.Clock += time.Duration(n) * time.Hour
			case unit == 'M':
				if n > int(maxClock/time.Minute) {
					return d, fmt.Errorf("duration %q is too long", s)
				}
				d.Clock += time.Duration(n) * time.Minute
			}
			if d.Years > 10000 || d.Months > 120000 || d.Weeks > 530000 || d.Days > 3700000 {
				return d, fmt.Errorf("duration %q is too long", s)
			}
			continue
		}
		f, err := strconv.ParseFloat(replaceComma(num), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > float64(maxClock/time.Second) {
			return d, fmt.Errorf("bad seconds %q in duration %q", num, s)
		}
		d.Clock += time.Duration(f * float64(time.Second))
	}
	if seen == 0 {
		return d, fmt.Errorf("duration %q has no components", s)
	}
	if d.Clock > maxClock || d.Clock < 0 {
		return d, fmt.Errorf("duration %q is too long", s)
	}
	return d, nil
}

func replaceComma(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == ',' {
			b[i] = '.'
		}
	}
	return string(b)
}

// AddTo returns t + d.
func (d Duration) AddTo(t time.Time) time.Time {
	return t.AddDate(d.Years, d.Months, d.Weeks*7+d.Days).Add(d.Clock)
}

// IsZero reports whether the duration is zero.
func (d Duration) IsZero() bool { return d == Duration{} }
