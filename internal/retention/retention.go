// Package retention parses the retention settings (-retain-expectations,
// -retain-evidence; RETAIN_EXPECTATIONS and RETAIN_EVIDENCE on AWS; the
// CDK context values of the same names). It has no dependencies, so the
// CDK app, which must not link package net, validates them with the same
// code as the runtimes.
package retention

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults of the two settings.
const (
	DefaultExpectations = "P90D"
	DefaultEvidence     = "P400D"
)

// Max bounds a retention: 100 years.
const Max = 100 * 365 * 24 * time.Hour

// Parse parses a retention: a Go duration ("72h", "3s"), an ISO 8601
// duration of whole components ("P90D", "P1Y", "PT12H"; a day is 24 hours,
// a week 7 days, a month 30 days, a year 365 days, since a retention is a
// length rather than a calendar step), or "0", which keeps forever (as
// does any zero duration). Negative values, fractions in an ISO duration
// and anything beyond Max are errors.
func Parse(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if len(s) > 0 && s[0] == 'P' {
		d, err = parseISO(s)
	} else if d, err = time.ParseDuration(s); err != nil {
		err = fmt.Errorf("retention %q is neither a Go duration (72h), an ISO 8601 one (P90D), nor 0", s)
	}
	switch {
	case err != nil:
		return 0, err
	case d < 0:
		return 0, fmt.Errorf("retention %q is negative", s)
	case d > Max:
		return 0, fmt.Errorf("retention %q is beyond 100 years", s)
	}
	return d, nil
}

func parseISO(s string) (time.Duration, error) {
	const day = 24 * time.Hour
	dateUnits := map[byte]time.Duration{'Y': 365 * day, 'M': 30 * day, 'W': 7 * day, 'D': day}
	timeUnits := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}
	bad := fmt.Errorf("retention %q is not an ISO 8601 duration of whole components (P90D, PT12H)", s)
	var total time.Duration
	inTime, components, start, atT := false, 0, 1, 0
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			continue
		case c == 'T' && !inTime && i == start:
			inTime, start, atT = true, i+1, components
			continue
		}
		units := dateUnits
		if inTime {
			units = timeUnits
		}
		unit, ok := units[c]
		if !ok || i == start {
			return 0, bad
		}
		n, err := strconv.ParseInt(s[start:i], 10, 64)
		if err != nil || n > int64(Max/unit) {
			return 0, fmt.Errorf("retention %q is beyond 100 years", s)
		}
		total += time.Duration(n) * unit
		if total > Max {
			return 0, fmt.Errorf("retention %q is beyond 100 years", s)
		}
		components++
		start = i + 1
	}
	if components == 0 || start != len(s) || inTime && components == atT {
		return 0, bad
	}
	return total, nil
}
