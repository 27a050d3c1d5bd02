// Package retry decides when a failed delivery (a lapse task, an alert
// notification) is tried again and when it is given up, and keeps the
// state of each destination's circuit, so that one destination that is
// down gets one probe at a time instead of every waiting message. It is
// pure: callers load the state, ask, and commit what it returns.
//
// The schedule is exponential backoff with full jitter (each wait drawn
// uniformly below a ceiling that is the time spent failing so far, from
// Policy.Base up to Policy.Ceiling), over a window (Policy.For, a day by default, as
// Standard Webhooks senders retry for about a day) that starts at the
// first failure; the last attempt falls at the window's end. The jitter is
// drawn from a hash of the message and its attempt number, so that every
// process computes the same next attempt for one failure and a test can
// replay a schedule exactly.
package retry

import (
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of Policy.
const (
	DefaultFor     = 24 * time.Hour
	DefaultBase    = time.Second
	DefaultCeiling = time.Hour
)

// Policy says how long and how often a failed delivery is tried again.
type Policy struct {
	// For is the retry window, from the first failure: no attempt is made
	// after it (default DefaultFor).
	For time.Duration
	// Base is the ceiling of the first wait; each later ceiling doubles
	// (default DefaultBase).
	Base time.Duration
	// Ceiling bounds every wait, so that a destination that is back is
	// tried within Ceiling at the latest (default DefaultCeiling).
	Ceiling time.Duration
	// MaxAttempts, when positive, also gives up after that many attempts
	// (tests and operators who want a short budget; zero: For alone).
	MaxAttempts int
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.For <= 0 {
		p.For = DefaultFor
	}
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Ceiling <= 0 {
		p.Ceiling = DefaultCeiling
	}
	if p.Base > p.Ceiling {
		p.Base = p.Ceiling
	}
	return p
}

// Class names what kind of failure an attempt met, as records and the
// console show it.
type Class string

// The classes of failure.
const (
	// Unreachable: the connection was refused or reset, or the name did
	// not resolve (transient).
	Unreachable Class = "unreachable"
	// Timeout: no answer within the attempt's bound (transient).
	Timeout Class = "timeout"
	// Throttled: HTTP 429 (transient; Retry-After honoured).
	Throttled Class = "throttled"
	// ServerError: HTTP 5xx, 408 or 425, or a JSON-RPC internal error
	// (transient; Retry-After honoured).
	ServerError Class = "server-error"
	// Rejected: HTTP 4xx other than those above, or a JSON-RPC error that
	// a retry cannot change (permanent).
	Rejected Class = "rejected"
	// Unauthorized: the destination refused the credentials (401/403,
	// after one refresh; permanent).
	Unauthorized Class = "unauthorized"
	// Refused: the outbound guard refused the destination's address
	// (permanent).
	Refused Class = "refused"
	// Misconfigured: the card, channel or message cannot be sent as it is
	// (permanent).
	Misconfigured Class = "misconfigured"
	// Unknown: anything else (transient).
	Unknown Class = "unknown"
)

// Failure describes one failed attempt.
type Failure struct {
	Class Class
	// Permanent failures are given up at once: the same send would fail
	// the same way.
	Permanent bool
	// RetryAfter is what the destination asked for (Retry-After), or zero.
	RetryAfter time.Duration
}

// DownsDestination reports whether f says the destination itself is down
// (so the other messages to it should wait for a probe), rather than that
// this one message was refused.
func (f Failure) DownsDestination() bool {
	if f.Permanent {
		return false
	}
	switch f.Class {
	case Unreachable, Timeout, Throttled, ServerError:
		return true
	}
	return false
}

// Decision is what to do after a failure.
type Decision struct {
	// Dead is set when the delivery is given up (dead-lettered).
	Dead bool
	// Next is when to try again (zero when Dead).
	Next time.Time
}

// AfterFailure decides what follows the attempts-th failed attempt of the
// message named key, at now, in a run of failures that began at since:
// give up when the failure is permanent, the attempt budget is spent or
// the window has closed; otherwise try again after the jittered backoff or
// what the destination asked for, whichever is later, and at the window's
// end at the latest.
func (p Policy) AfterFailure(key string, attempts int, since, now time.Time, f Failure) Decision {
	p = p.WithDefaults()
	if f.Permanent || (p.MaxAttempts > 0 && attempts >= p.MaxAttempts) {
		return Decision{Dead: true}
	}
	end := since.Add(p.For)
	if !now.Before(end) {
		return Decision{Dead: true}
	}
	wait := max(p.Backoff(key, attempts, now.Sub(since)), f.RetryAfter)
	next := now.Add(wait)
	if next.After(end) {
		next = end
	}
	return Decision{Next: next}
}

// Expired reports whether a delivery failing since since may no longer be
// attempted at now.
func (p Policy) Expired(since, now time.Time) bool {
	p = p.WithDefaults()
	return !since.IsZero() && !now.Before(since.Add(p.For))
}

// Backoff is the wait after the attempts-th failure of the message named
// key, which has been failing for elapsed: drawn uniformly in
// [Base/10, ceiling) where the ceiling is elapsed itself, at least Base and
// at most Ceiling. A ceiling that grows with the time spent failing rather
// than with the count of attempts keeps the wait after an outage shorter
// than the outage (a destination back after T is tried within T), where
// doubling per attempt lets a run of short draws leave the ceiling far
// ahead of the time actually waited. The floor keeps a run of unlucky
// draws from turning into a busy loop.
func (p Policy) Backoff(key string, attempts int, elapsed time.Duration) time.Duration {
	p = p.WithDefaults()
	ceiling := min(max(elapsed, p.Base), p.Ceiling)
	floor := p.Base / 10
	return floor + time.Duration(Jitter(key, attempts)*float64(ceiling-floor))
}

// Jitter is a number in [0, 1) drawn from key and n: the same for every
// process that asks, spread evenly over keys.
func Jitter(key string, n int) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(n)))
	// FNV's low bits mix poorly for short inputs: finish with splitmix64.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(uint64(1)<<53)
}

// ParseRetryAfter reads an HTTP Retry-After value (delay-seconds or an
// HTTP-date, RFC 9110 section 10.2.3) as a wait from now; zero when it is
// absent, malformed or past, and at most a day.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}
