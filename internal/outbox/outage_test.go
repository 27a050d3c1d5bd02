package outbox

// Agents that are down for a while, on a simulated clock: the real A2A
// sender sends to a real A2A agent (the SDK's server) through a front
// whose port refuses connections while the agent is "down".

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/watcher"
)

// front is a port in front of an agent that can be taken down (its
// listener closed: connections are refused) and brought back on the same
// port. It counts the requests that reached the agent.
type front struct {
	t       *testing.T
	addr    string
	handler http.Handler

	mu       sync.Mutex
	srv      *http.Server
	requests atomic.Int64
}

func newFront(t *testing.T, agent *a2atest.Agent) *front {
	t.Helper()
	target, err := url.Parse(agent.URL())
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	f := &front{t: t}
	proxy := httputil.NewSingleHostReverseProxy(target)
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		proxy.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	f.serve(l)
	t.Cleanup(func() { f.set(false) })
	return f
}

func (f *front) serve(l net.Listener) {
	f.srv = &http.Server{Handler: f.handler}
	go f.srv.Serve(l)
}

// set brings the agent up or takes it down.
func (f *front) set(up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case up && f.srv == nil:
		l, err := net.Listen("tcp", f.addr)
		if err != nil {
			f.t.Fatalf("the front's port again: %v", err)
		}
		f.serve(l)
	case !up && f.srv != nil:
		f.srv.Close()
		f.srv = nil
	}
}

// downAgent returns a watcher whose agent a1's card points at a front (up)
// and has n lapsed expectations awaiting delivery, the watcher's clock and
// the front.
func downAgent(t *testing.T, n int) (*watcher.Service, *atomic.Int64, *front) {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "o.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &atomic.Int64{}
	t0 := time.Now().UTC().Truncate(time.Second)
	clock.Store(t0.UnixNano())
	svc := watcher.New(st, func() time.Time { return time.Unix(0, clock.Load()).UTC() }, expect.DefaultConfig())
	agent := a2atest.NewAgent(t, "1.0")
	f := newFront(t, agent)
	agentHost := strings.TrimPrefix(strings.TrimSuffix(agent.URL(), a2atest.RPCPath), "http://")
	card := strings.ReplaceAll(string(agent.Card()), agentHost, f.addr)
	if _, err := svc.PutCard(ctx, "a1", []byte(card)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 50 {
		var es []expect.Expectation
		for j := i; j < min(n, i+50); j++ {
			es = append(es, expect.Expectation{ExpectationID: fmt.Sprintf("e%d", j), Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: fmt.Sprint(j)},
				Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: fmt.Sprintf("paid.%d", j)}, DueAt: expect.FormatTime(t0.Add(time.Second)), Basis: "contract"})
		}
		recs, err := svc.Raise(ctx, "a1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: es})
		if err != nil {
			t.Fatal(err)
		}
		clock.Store(t0.Add(2 * time.Second).UnixNano())
		var ins []expect.Instant
		for _, r := range recs {
			ins = append(ins, expect.Instants(r)...)
		}
		if err := svc.TickMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
		clock.Store(t0.UnixNano())
	}
	clock.Store(t0.Add(2 * time.Second).UnixNano())
	return svc, clock, f
}

func realSender() *a2aout.Sender {
	return a2aout.NewSender(a2aout.Options{HTTPClient: netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 10*time.Second)})
}

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

// TestAgentBackAfterAnOutageGetsItsTask: an agent down for 90 s, 10 min
// or an hour (connections refused) gets its lapse task within about the
// outage's length of coming back, once, with every failure recorded as
// unreachable; a restart of the outbox midway (its state is the record and
// the circuit in the store) changes nothing.
func TestAgentBackAfterAnOutageGetsItsTask(t *testing.T) {
	for _, outage := range []time.Duration{90 * time.Second, 10 * time.Minute, time.Hour} {
		t.Run(outage.String(), func(t *testing.T) {
			ctx := context.Background()
			svc, clock, f := downAgent(t, 1)
			now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
			start := now()
			back := start.Add(outage)
			o := New(svc, realSender(), Options{}, quiet)
			restarted := false
			for range 1000 {
				f.set(!now().Before(back))
				if !restarted && now().After(start.Add(outage/2)) {
					o, restarted = New(svc, realSender(), Options{}, quiet), true
				}
				wait, again := o.Attempt(ctx, "a1", "e0")
				rec, err := svc.Get(ctx, "a1", "e0")
				if err != nil {
					t.Fatal(err)
				}
				d := rec.Delivery
				if d.DeliveredAt != "" {
					at, _ := expect.ParseTime(d.DeliveredAt)
					after := at.Sub(back)
					t.Logf("down %s: delivered %s after the agent was back, after %d failed attempts (%d requests reached it)",
						outage, after.Round(time.Second), d.Attempts-1, f.requests.Load())
					if after > outage {
						t.Fatalf("delivered %s after the agent was back from a %s outage", after, outage)
					}
					if f.requests.Load() != 1 || rec.LapseTaskID == "" || d.LastError != "" || d.WaitingForProbe {
						t.Fatalf("%d requests reached the agent; record %+v", f.requests.Load(), d)
					}
					return
				}
				if !again || d.DeadLettered {
					t.Fatalf("gave up at %s: %+v", now().Sub(start), d)
				}
				if d.Attempts > 0 && d.LastErrorClass != string(retry.Unreachable) {
					t.Fatalf("failure class %q, want unreachable (%s)", d.LastErrorClass, d.LastError)
				}
				clock.Add(int64(max(wait, time.Millisecond)))
			}
			t.Fatal("not delivered after 1000 attempts")
		})
	}
}

// TestCompressedRetryWindowDeadLetters: with a two-minute window
// (-delivery-retry-for 2m), an agent that never comes back is
// dead-lettered at the window's end, after a bounded number of attempts.
func TestCompressedRetryWindowDeadLetters(t *testing.T) {
	ctx := context.Background()
	svc, clock, f := downAgent(t, 1)
	f.set(false)
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	start := now()
	o := New(svc, realSender(), Options{RetryFor: 2 * time.Minute}, quiet)
	for range 1000 {
		wait, again := o.Attempt(ctx, "a1", "e0")
		if !again {
			break
		}
		clock.Add(int64(max(wait, time.Millisecond)))
	}
	rec, _ := svc.Get(ctx, "a1", "e0")
	d := rec.Delivery
	if !d.DeadLettered || d.DeliveredAt != "" || d.LastErrorClass != string(retry.Unreachable) {
		t.Fatalf("after the window: %+v", d)
	}
	if took := now().Sub(start); took < 2*time.Minute || took > 2*time.Minute+time.Second {
		t.Fatalf("dead-lettered %s after the first failure, want at the window's end (2m)", took)
	}
	if d.Attempts < 5 || d.Attempts > 30 {
		t.Fatalf("%d attempts in two minutes", d.Attempts)
	}
	t.Logf("dead-lettered after %d attempts over %s: %s", d.Attempts, now().Sub(start), d.LastError)
}

// TestPermanentFailureDeadLettersAtOnce: an agent that answers 400 (a
// request it will never take) is not retried.
func TestPermanentFailureDeadLettersAtOnce(t *testing.T) {
	ctx := context.Background()
	svc, _, _ := downAgent(t, 1)
	sender := &errSender{err: &a2aout.StatusError{StatusCode: http.StatusBadRequest}}
	o := New(svc, sender, Options{}, quiet)
	if _, again := o.Attempt(ctx, "a1", "e0"); again {
		t.Fatal("a permanent failure asked for a retry")
	}
	rec, _ := svc.Get(ctx, "a1", "e0")
	if d := rec.Delivery; !d.DeadLettered || d.Attempts != 1 || d.LastErrorClass != string(retry.Rejected) {
		t.Fatalf("after a 400: %+v", d)
	}
}

// TestRetryAfterIsHonoured: an agent that answers 429 with Retry-After:
// 120 is not tried again before two minutes.
func TestRetryAfterIsHonoured(t *testing.T) {
	ctx := context.Background()
	svc, _, _ := downAgent(t, 1)
	sender := &errSender{err: &a2aout.StatusError{StatusCode: http.StatusTooManyRequests, RetryAfter: 2 * time.Minute}}
	o := New(svc, sender, Options{}, quiet)
	wait, again := o.Attempt(ctx, "a1", "e0")
	rec, _ := svc.Get(ctx, "a1", "e0")
	if !again || wait < 2*time.Minute || rec.Delivery.LastErrorClass != string(retry.Throttled) {
		t.Fatalf("after a 429 asking for 120 s: retry %v in %s, %+v", again, wait, rec.Delivery)
	}
}

type errSender struct {
	err   error
	sends atomic.Int64
}

func (s *errSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	s.sends.Add(1)
	return "", s.err
}

// countingSender counts the sends that reach the real sender.
type countingSender struct {
	*a2aout.Sender
	sends atomic.Int64
}

func (s *countingSender) SendLapse(ctx context.Context, card expect.Card, m a2aout.Message) (a2aout.Outcome, error) {
	s.sends.Add(1)
	return s.Sender.SendLapse(ctx, card, m)
}

// TestCircuitBoundsAttemptsToADownAgent: 10,000 lapses to one agent that
// is down for twenty minutes make a few dozen sends between them while it
// is down (the circuit's probes), not 10,000 times each one's schedule;
// once it is back every one is delivered, once, within a few minutes.
func TestCircuitBoundsAttemptsToADownAgent(t *testing.T) {
	n := 10000
	if testing.Short() || raceEnabled {
		n = 1000
	}
	ctx := context.Background()
	svc, clock, f := downAgent(t, n)
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	start := now()
	outage := 20 * time.Minute
	back := start.Add(outage)
	sender := &countingSender{Sender: realSender()}
	o := New(svc, sender, Options{}, quiet)
	q := &wakeQueue{}
	for i := range n {
		heap.Push(q, wake{at: start, id: fmt.Sprintf("e%d", i)})
	}
	sendsWhileDown, wakes := int64(0), 0
	var last time.Time
	for q.Len() > 0 {
		w := heap.Pop(q).(wake)
		if w.at.After(now()) {
			clock.Store(w.at.UnixNano())
		}
		up := !now().Before(back)
		f.set(up)
		before := sender.sends.Load()
		wait, again := o.Attempt(ctx, "a1", w.id)
		wakes++
		if !up {
			sendsWhileDown += sender.sends.Load() - before
		}
		if again {
			heap.Push(q, wake{at: now().Add(max(wait, time.Millisecond)), id: w.id})
			continue
		}
		last = now()
	}
	delivered := 0
	for i := range n {
		rec, err := svc.Get(ctx, "a1", fmt.Sprintf("e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Delivery.DeliveredAt != "" && !rec.Delivery.DeadLettered {
			delivered++
		}
	}
	t.Logf("%d lapses to an agent down for %s: %d sends while it was down, %d requests reached it once back, %d wake-ups (%.1f a lapse), all delivered %s after it was back",
		n, outage, sendsWhileDown, f.requests.Load(), wakes, float64(wakes)/float64(n), last.Sub(back).Round(time.Second))
	if delivered != n || f.requests.Load() != int64(n) {
		t.Fatalf("%d of %d delivered, %d requests reached the agent", delivered, n, f.requests.Load())
	}
	// The circuit lets a probe through every backoff period: about 15 in
	// twenty minutes, and the failures of the sends that were under way
	// when it opened (none here: one at a time).
	if sendsWhileDown > 40 {
		t.Fatalf("%d sends to the agent while it was down", sendsWhileDown)
	}
	if after := last.Sub(back); after > outage {
		t.Fatalf("the last lapse went out %s after the agent was back", after)
	}
}

type wake struct {
	at time.Time
	id string
}

// wakeQueue is a min-heap of wakes by time (container/heap).
type wakeQueue []wake

func (q wakeQueue) Len() int           { return len(q) }
func (q wakeQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q wakeQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)        { *q = append(*q, x.(wake)) }
func (q *wakeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
