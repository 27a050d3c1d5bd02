package retry

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func TestAfterFailure(t *testing.T) {
	p := Policy{}.WithDefaults()
	transient := Failure{Class: Unreachable}
	for _, tc := range []struct {
		name     string
		policy   Policy
		attempts int
		since    time.Time
		now      time.Time
		f        Failure
		dead     bool
		// next bounds (inclusive) when not dead
		from, to time.Time
	}{
		{name: "first failure waits below Base", attempts: 1, since: t0, now: t0, f: transient,
			from: t0.Add(p.Base / 10), to: t0.Add(p.Base)},
		{name: "the ceiling is the time spent failing", attempts: 4, since: t0, now: t0.Add(10 * time.Second), f: transient,
			from: t0.Add(10*time.Second + p.Base/10), to: t0.Add(20 * time.Second)},
		{name: "never beyond Ceiling", attempts: 40, since: t0, now: t0.Add(10 * time.Hour), f: transient,
			from: t0.Add(10*time.Hour + p.Base/10), to: t0.Add(11 * time.Hour)},
		{name: "Retry-After is honoured", attempts: 1, since: t0, now: t0, f: Failure{Class: Throttled, RetryAfter: 2 * time.Minute},
			from: t0.Add(2 * time.Minute), to: t0.Add(2 * time.Minute)},
		{name: "the last attempt falls at the window's end", attempts: 30, since: t0, now: t0.Add(23*time.Hour + 59*time.Minute), f: transient,
			from: t0.Add(24 * time.Hour), to: t0.Add(24 * time.Hour)},
		{name: "Retry-After past the window: the window's end", attempts: 1, since: t0, now: t0.Add(23 * time.Hour), f: Failure{Class: ServerError, RetryAfter: 48 * time.Hour},
			from: t0.Add(24 * time.Hour), to: t0.Add(24 * time.Hour)},
		{name: "the window closed", attempts: 30, since: t0, now: t0.Add(24 * time.Hour), f: transient, dead: true},
		{name: "permanent", attempts: 1, since: t0, now: t0, f: Failure{Class: Rejected, Permanent: true}, dead: true},
		{name: "attempt budget", policy: Policy{MaxAttempts: 3}, attempts: 3, since: t0, now: t0, f: transient, dead: true},
		{name: "within the attempt budget", policy: Policy{MaxAttempts: 3}, attempts: 2, since: t0, now: t0, f: transient,
			from: t0.Add(p.Base / 10), to: t0.Add(p.Base)},
		{name: "a short window", policy: Policy{For: 2 * time.Minute}, attempts: 9, since: t0, now: t0.Add(110 * time.Second), f: transient,
			from: t0.Add(110*time.Second + p.Base/10), to: t0.Add(2 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.policy.AfterFailure("msg-1", tc.attempts, tc.since, tc.now, tc.f)
			if d.Dead != tc.dead {
				t.Fatalf("dead %v, want %v (%+v)", d.Dead, tc.dead, d)
			}
			if !tc.dead && (d.Next.Before(tc.from) || d.Next.After(tc.to)) {
				t.Fatalf("next %s, want within [%s, %s]", d.Next, tc.from, tc.to)
			}
		})
	}
}

func TestJitterIsDeterministicAndSpread(t *testing.T) {
	if Jitter("a", 1) != Jitter("a", 1) {
		t.Fatal("the same key and attempt drew two jitters")
	}
	var buckets [10]int
	for i := range 10000 {
		j := Jitter(fmt.Sprintf("m-%d", i), 3)
		if j < 0 || j >= 1 {
			t.Fatalf("jitter %v out of [0,1)", j)
		}
		buckets[int(j*10)]++
	}
	for i, n := range buckets {
		if n < 850 || n > 1150 {
			t.Fatalf("bucket %d holds %d of 10000 draws: %v", i, n, buckets)
		}
	}
}

// TestOutageRecovery replays the schedule of many messages to a
// destination that is down from t0 for an outage of length T and measures
// when each is delivered after it is back: within T (the wait never
// exceeds the time spent failing), and never given up within the window.
func TestOutageRecovery(t *testing.T) {
	p := Policy{}.WithDefaults()
	for _, outage := range []time.Duration{90 * time.Second, 10 * time.Minute, time.Hour, 6 * time.Hour} {
		var delays []time.Duration
		for i := range 2000 {
			key := fmt.Sprintf("msg-%d", i)
			now, attempts := t0, 0
			for now.Before(t0.Add(outage)) {
				attempts++
				d := p.AfterFailure(key, attempts, t0, now, Failure{Class: Unreachable})
				if d.Dead {
					t.Fatalf("%s given up after %s of a %s outage", key, now.Sub(t0), outage)
				}
				now = d.Next
			}
			delays = append(delays, now.Sub(t0.Add(outage)))
		}
		slices.Sort(delays)
		p50, p99, worst := delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1]
		t.Logf("outage %s: delivered after it ended: p50 %s, p99 %s, max %s", outage, p50.Round(time.Second), p99.Round(time.Second), worst.Round(time.Second))
		if worst > outage {
			t.Fatalf("outage %s: p99 %s, max %s after the agent was back", outage, p99, worst)
		}
	}
}

// TestDayLongOutageGivesUpAtTheWindow: a destination that never comes back
// is tried until the window's end and then given up, about hourly at the
// end, a bounded number of times.
func TestDayLongOutageGivesUpAtTheWindow(t *testing.T) {
	p := Policy{}.WithDefaults()
	now, attempts := t0, 0
	var last time.Time
	for {
		attempts++
		d := p.AfterFailure("msg", attempts, t0, now, Failure{Class: Timeout})
		if d.Dead {
			break
		}
		if gap := d.Next.Sub(now); gap > p.Ceiling {
			t.Fatalf("a wait of %s", gap)
		}
		last, now = now, d.Next
	}
	if now != t0.Add(p.For) {
		t.Fatalf("the last attempt at %s, want the window's end %s", now, t0.Add(p.For))
	}
	if attempts < 30 || attempts > 100 {
		t.Fatalf("%d attempts over a day", attempts)
	}
	t.Logf("a day-long outage: %d attempts, the last two %s apart", attempts, now.Sub(last))
}

func TestCircuit(t *testing.T) {
	p := Policy{}.WithDefaults()
	hold := 12 * time.Second
	down := Failure{Class: Unreachable}

	var c Circuit
	if a, _, _ := c.Admit(t0, hold, "m1"); a != Send {
		t.Fatal("a closed circuit sends")
	}
	if got := c.Failed("agent:a", false, t0, p, Failure{Class: Rejected, Permanent: true}); got.Open() {
		t.Fatal("one message's refusal opened the circuit")
	}
	// Failures in a row are counted while it stays closed; a success in
	// between would clear them (the caller deletes the stored circuit).
	for i := 1; i < OpenAfter; i++ {
		c = c.Failed("agent:a", false, t0, p, down)
		if c.Open() || c.Failures != i || c.Zero() {
			t.Fatalf("failure %d of %d: %+v", i, OpenAfter, c)
		}
		if a, _, _ := c.Admit(t0, hold, "m1"); a != Send {
			t.Fatal("a circuit counting failures still sends")
		}
	}
	c = c.Failed("agent:a", false, t0, p, down)
	if !c.Open() || c.Probes != 1 || !c.NextProbeAt.After(t0) || c.LastClass != Unreachable {
		t.Fatalf("opened: %+v", c)
	}
	// A send admitted while closed that fails after: no second count.
	if again := c.Failed("agent:a", false, t0.Add(time.Millisecond), p, down); again != c {
		t.Fatalf("a racing failure changed the circuit: %+v", again)
	}
	// Before the probe is due, every attempt waits until it (spread).
	a, _, until := c.Admit(t0, hold, "m2")
	if a != Wait || until.Before(c.NextProbeAt) || until.After(c.NextProbeAt.Add(hold)) {
		t.Fatalf("before the probe: %v until %s (probe %s)", a, until, c.NextProbeAt)
	}
	// At the probe's time one attempt probes; the others wait for it.
	at := c.NextProbeAt
	a, probing, _ := c.Admit(at, hold, "m3")
	if a != Probe || !probing.ProbeUntil.Equal(at.Add(hold)) {
		t.Fatalf("due: %v %+v", a, probing)
	}
	// During the probe the others look again soon (most probes answer
	// at once), not after its whole hold.
	a, _, until = probing.Admit(at.Add(time.Second), hold, "m4")
	if a != Wait || until.Before(at.Add(time.Second+WaitSpread/2)) || until.After(at.Add(time.Second+WaitSpread)) {
		t.Fatalf("during the probe: %v until %s", a, until)
	}
	// A probe whose holder died: another probe after hold.
	if a, _, _ := probing.Admit(at.Add(hold), hold, "m5"); a != Probe {
		t.Fatalf("after a dead probe's hold: %v", a)
	}
	// A failed probe backs off further; one that answers closes it.
	failed := probing.Failed("agent:a", true, at, p, Failure{Class: Throttled, RetryAfter: time.Minute})
	if failed.Probes != 2 || !failed.NextProbeAt.Equal(at.Add(time.Minute)) || !failed.ProbeUntil.IsZero() {
		t.Fatalf("failed probe: %+v", failed)
	}
	if got := probing.Failed("agent:a", true, at, p, Failure{Class: Rejected, Permanent: true}); got.Open() {
		t.Fatal("a probe the destination answered (with a refusal) left the circuit open")
	}
	if got := probing.Succeeded(); got.Open() {
		t.Fatal("a successful probe left the circuit open")
	}
}

// TestCircuitBoundsAttemptsToADownDestination: 10,000 messages to a
// destination down for twelve hours, each following its own schedule and
// the circuit, send once per probe period between them (the failure that
// opened it aside), and all of them go out soon after it is back.
func TestCircuitBoundsAttemptsToADownDestination(t *testing.T) {
	p := Policy{}.WithDefaults()
	hold := 12 * time.Second
	const n = 10000
	outage := 12 * time.Hour
	var c Circuit
	q := &wakeQueue{}
	for i := range n {
		heap.Push(q, &waiting{key: fmt.Sprintf("m%d", i), next: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	sends, wakes := 0, 0
	var latest time.Duration
	for q.Len() > 0 {
		m := heap.Pop(q).(*waiting)
		now := m.next
		wakes++
		a, admitted, until := c.Admit(now, hold, m.key)
		if a == Wait {
			m.next = until
			heap.Push(q, m)
			continue
		}
		c = admitted
		sends++
		if !now.Before(t0.Add(outage)) {
			latest = max(latest, now.Sub(t0.Add(outage)))
			c = c.Succeeded()
			continue
		}
		m.attempts++
		c = c.Failed("agent:a", a == Probe, now, p, Failure{Class: Unreachable})
		d := p.AfterFailure(m.key, m.attempts, t0, now, Failure{Class: Unreachable})
		if d.Dead {
			t.Fatalf("%s given up", m.key)
		}
		m.next = d.Next
		heap.Push(q, m)
	}
	t.Logf("%d messages to a destination down for %s: %d sends, %d wake-ups (%.1f a message), the last delivered %s after it was back",
		n, outage, sends, wakes, float64(wakes)/n, latest.Round(time.Second))
	// The probes (about 12 while the backoff grows, then hourly), the
	// failure that opened it and the n deliveries once it is back.
	if extra := sends - n; extra > 60 {
		t.Fatalf("%d sends beyond the %d deliveries", extra, n)
	}
	if latest > p.Ceiling+hold {
		t.Fatalf("the last message went %s after the destination was back", latest)
	}
}

type waiting struct {
	key      string
	next     time.Time
	attempts int
}

type wakeQueue []*waiting

func (q wakeQueue) Len() int           { return len(q) }
func (q wakeQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q wakeQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)        { *q = append(*q, x.(*waiting)) }
func (q *wakeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// TestIntermittentFailuresDoNotOpen: a destination that fails one send in
// three (and answers the others) never has its circuit opened, so its
// messages are not held up waiting for probes; three failures in a row
// open it.
func TestIntermittentFailuresDoNotOpen(t *testing.T) {
	p := Policy{}.WithDefaults()
	var c Circuit
	for i := range 300 {
		if i%3 == 2 {
			c = c.Failed("agent:a", false, t0, p, Failure{Class: ServerError})
		} else {
			c = c.Succeeded() // Breakers clears a stored circuit on success
		}
		if c.Open() {
			t.Fatalf("opened after send %d", i)
		}
	}
	for range OpenAfter {
		c = c.Failed("agent:a", false, t0, p, Failure{Class: ServerError})
	}
	if !c.Open() {
		t.Fatalf("%d failures in a row left it closed: %+v", OpenAfter, c)
	}
}
