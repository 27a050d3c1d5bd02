package retry

import "time"

// Circuit is the state of one destination (an agent's A2A endpoint, an
// alert channel): closed while it answers; open from OpenAfter failures in
// a row that say the destination is down, until a probe succeeds.
// While it is open one attempt at a time (the probe) is let through when
// the probe is due, and every other attempt waits for it, so that a
// thousand messages to a destination that is down make one attempt per
// probe period between them, not a thousand.
type Circuit struct {
	// Failures counts the failures in a row while closed (a success
	// resets it); the OpenAfter-th opens the circuit. A destination that
	// fails now and then (one send in three) is not held up by them.
	Failures int `json:"failures,omitempty"`
	// OpenedAt is when the circuit opened (zero: closed).
	OpenedAt time.Time `json:"openedAt,omitzero"`
	// Probes counts the failures since it opened (the opening one first).
	Probes int `json:"probes,omitempty"`
	// NextProbeAt is when the next probe may go.
	NextProbeAt time.Time `json:"nextProbeAt,omitzero"`
	// ProbeUntil is set while a probe is in flight: until then no other
	// probe goes; after it (its holder died) another may.
	ProbeUntil time.Time `json:"probeUntil,omitzero"`
	// LastClass is the class of the last failure.
	LastClass Class `json:"lastClass,omitempty"`
}

// OpenAfter is how many failures in a row open a circuit.
const OpenAfter = 3

// Open reports whether the circuit is open.
func (c Circuit) Open() bool { return !c.OpenedAt.IsZero() }

// Zero reports whether the circuit holds nothing (closed, no failure
// counted): it need not be stored.
func (c Circuit) Zero() bool { return c == Circuit{} }

// Admission is what an attempt may do.
type Admission int

// The admissions.
const (
	// Send: the circuit is closed; send.
	Send Admission = iota + 1
	// Probe: the circuit is open and this attempt is its probe; commit
	// the returned circuit first (it holds the probe), then send.
	Probe
	// Wait: the circuit is open; try again at the returned time.
	Wait
)

// Admit decides what an attempt at now may do. hold bounds a probe (the
// attempt's timeout and the time to record it): another probe may go when
// it has passed. For Probe it returns the circuit to commit; for Wait, the
// time to come back, spread by spreadKey's jitter over up to WaitSpread
// past the probe's time, so that the waiters of one destination mostly
// come back after its probe has answered (most answer, or are refused, in
// well under a second) rather than all at once with it.
func (c Circuit) Admit(now time.Time, hold time.Duration, spreadKey string) (Admission, Circuit, time.Time) {
	if !c.Open() {
		return Send, c, time.Time{}
	}
	if now.Before(c.ProbeUntil) {
		// A probe is in flight: most answer in well under a second, so
		// look again soon rather than for the whole of its hold.
		again := now.Add(WaitSpread/2 + time.Duration(Jitter(spreadKey, -2)*float64(WaitSpread/2)))
		if at := spread(c.ProbeUntil, now, hold, spreadKey); at.Before(again) {
			again = at
		}
		return Wait, c, again
	}
	if now.Before(c.NextProbeAt) {
		return Wait, c, spread(c.NextProbeAt, now, hold, spreadKey)
	}
	c.ProbeUntil = now.Add(hold)
	return Probe, c, time.Time{}
}

// WaitSpread bounds how far past a probe's time its waiters are spread.
const WaitSpread = 2 * time.Second

func spread(at, now time.Time, hold time.Duration, key string) time.Time {
	width := min(hold, WaitSpread, at.Sub(now))
	return at.Add(time.Duration(Jitter(key, -1) * float64(width)))
}

// Succeeded returns the circuit after a send that succeeded: closed.
func (c Circuit) Succeeded() Circuit { return Circuit{} }

// Failed returns the circuit after a send to destination dest failed at
// now with f. A failure that says the destination is down is counted on a
// closed circuit, and the OpenAfter-th in a row opens it; a failed probe
// moves the next probe later by the policy's backoff (keyed by dest) or
// what the destination asked for. A send that was admitted while the
// circuit was closed and failed after another had opened it changes
// nothing (the opening failures counted), nor does a failure of this one
// message (a permanent one).
func (c Circuit) Failed(dest string, probe bool, now time.Time, p Policy, f Failure) Circuit {
	if !f.DownsDestination() {
		if probe {
			// The destination answered: it is up, even if this message
			// was refused.
			return Circuit{}
		}
		return c
	}
	switch {
	case !c.Open():
		c.Failures++
		c.LastClass = f.Class
		if c.Failures < OpenAfter {
			return c
		}
		c = Circuit{OpenedAt: now, Probes: 1}
	case probe:
		c.Probes++
	default:
		return c
	}
	c.LastClass = f.Class
	c.ProbeUntil = time.Time{}
	c.NextProbeAt = now.Add(max(p.Backoff(dest, c.Probes, now.Sub(c.OpenedAt)), f.RetryAfter))
	return c
}
