package awsrt

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsclient"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// precisionEnv is a runtime in the local AWS mode on the emulator, with the
// emulated Scheduler's faults on.
type precisionEnv struct {
	rt    *Runtime
	local *Local
}

// startPrecision starts a runtime with precision p and the given faults;
// queue selects the timer queue and the sweep (the design of
// internal/scheduler queue.go), or neither (the former design).
func startPrecision(t *testing.T, p time.Duration, faults SchedulerFaults, queue bool) *precisionEnv {
	t.Helper()
	endpoint := dynamotest.Start(t)
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("prec-%x", b)
	cfg := Config{
		Table: name, ScheduleGroup: name,
		ClockFunctionARN: "arn:aws:lambda:us-east-1:000000000000:function:clock",
		SchedulerRoleARN: "arn:aws:iam::000000000000:role/scheduler",
		TokensJSON:       `{"tokens":[{"token":"t","principal":"p","scopes":["agents:write","expectations:write","facts:write","read"],"agents":["*"]}]}`,
		Endpoint:         endpoint, AllowPrivateAgents: true,
		SchedulerPrecision: p, SweepAfter: p,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if os.Getenv("CLOCKWORK_TEST_LOG") != "" {
		cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	sweep := time.Duration(-1)
	if queue {
		ac, err := AWSConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		q, err := CreateTimerQueue(context.Background(), awsclient.NewSQSSender(ac), name+"-timers")
		if err != nil {
			t.Fatal(err)
		}
		cfg.TimerQueueURL = q.URL
		sweep = p / 2
	}
	rt, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, err := StartLocal(rt, LocalOptions{PollInterval: 50 * time.Millisecond, Create: true, SchedulerFaults: faults, SweepInterval: sweep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	return &precisionEnv{rt: rt, local: local}
}

// lateness raises n expectations with zero grace, due between lead and
// lead+spread from now, waits until each has lapsed or until wait after the
// last is due, and returns the lateness of each lapse (lapsedAt - dueAt) and
// the number still open (lost).
func (e *precisionEnv) lateness(t *testing.T, n int, lead, spread, wait time.Duration) (late []time.Duration, lost int) {
	t.Helper()
	h := e.rt.HTTP()
	agent := a2atest.NewAgent(t, "1.0")
	call(t, h, "PUT", "/v1/agents/a1", agent.Card())
	start := time.Now()
	due := make(map[string]time.Time, n)
	var list []any
	for i := range n {
		at := start.Add(lead + spread*time.Duration(i)/time.Duration(n)).Add(time.Duration(i%7) * 137 * time.Millisecond)
		id := fmt.Sprintf("e%03d", i)
		due[id] = at
		list = append(list, exp(id, expect.FormatTime(at)))
		if len(list) == 50 {
			call(t, h, "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": list})
			list = nil
		}
	}
	if len(list) > 0 {
		call(t, h, "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": list})
	}
	// Wait until every expectation has lapsed or is lost: open, its
	// instant past, and nothing left that could still bring it (without a
	// queue, no schedule of it left in the group). The deadline is only a
	// bound on a hung run; a slow machine makes lapses late, not lost.
	deadline := start.Add(lead + spread + wait)
	pending := map[string]bool{}
	for id := range due {
		pending[id] = true
	}
	for len(pending) > 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		var live map[string]bool
		if !e.rt.Clock.HasQueue() {
			names, err := scheduler.ListNames(context.Background(), e.rt.Clock, start.Add(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			live = map[string]bool{}
			for _, n := range names {
				live[n] = true
			}
		}
		for id := range pending {
			if time.Now().Before(due[id]) {
				continue
			}
			var rec expect.Record
			if err := json.Unmarshal(call(t, h, "GET", "/v1/agents/a1/expectations/"+id, nil), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.State == expect.StateOpen {
				in := expect.Instant{AgentID: "a1", ExpectationID: id, Kind: expect.InstantGrace, At: due[id]}
				if live != nil && !live[scheduler.NameAt(in, e.rt.Clock.FireTime(in))] {
					delete(pending, id)
					lost++
				}
				continue
			}
			delete(pending, id)
			if rec.Lapse == nil {
				t.Fatalf("%s: %s without a lapse", id, rec.State)
			}
			at, err := expect.ParseTime(rec.Lapse.LapsedAt)
			if err != nil {
				t.Fatal(err)
			}
			if at.Before(due[id]) {
				t.Errorf("%s lapsed at %s, before its instant %s", id, rec.Lapse.LapsedAt, expect.FormatTime(due[id]))
			}
			late = append(late, at.Sub(due[id]))
		}
	}
	return late, lost + len(pending)
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// measurePrecision is Scheduler's precision in the lateness measurement:
// CLOCKWORK_LATENESS_PRECISION (e.g. 60s, the real one: a run of about
// ten minutes), else 3 s.
func measurePrecision(t *testing.T) time.Duration {
	if v := os.Getenv("CLOCKWORK_LATENESS_PRECISION"); v != "" {
		p, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CLOCKWORK_LATENESS_PRECISION: %v", err)
		}
		return p
	}
	return 3 * time.Second
}

// TestLapseLateness measures, and prints with -v, how late lapses land
// (lapsedAt - dueAt) in the local AWS mode with the emulated Scheduler
// firing every schedule anywhere from precision-1s early to precision late,
// a fifth of them twice: with the former design (one schedule at each
// instant: early fires lose the instant) and with the timer queue. It
// asserts no timing: only that, with the queue, no instant is lost and no
// lapse comes before its instant, and that the faults do bite the former
// design (it loses instants). Precision is scaled down to 3 s unless
// CLOCKWORK_LATENESS_PRECISION says otherwise (60s for the real figure).
func TestLapseLateness(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits for lapses at the emulated Scheduler's precision; the full run measures it")
	}
	p := measurePrecision(t)
	n := 40
	if p >= 30*time.Second {
		n = 120
	}
	faults := FaultsFor(p)
	faults.Drop = 0 // lateness of the fires that come; dropped ones: TestSweepFindsDroppedFires
	faults.Seed = 42
	lead, spread, wait := 3*p+2*time.Second, 2*p, 2*p+2*time.Minute
	for _, design := range []string{"before", "after"} {
		t.Run(design, func(t *testing.T) {
			t.Parallel()
			e := startPrecision(t, p, faults, design == "after")
			late, lost := e.lateness(t, n, lead, spread, wait)
			t.Logf("%s (precision %s, %d expectations, fires early by up to %s, late by up to %s, %.0f%% twice; emulated Scheduler %+v): lost %d; lateness p50 %s, p99 %s, max %s",
				design, p, n, faults.Early, faults.Late, faults.Twice*100, e.local.SchedulerStats(), lost,
				quantile(late, 0.5).Round(time.Millisecond), quantile(late, 0.99).Round(time.Millisecond), quantile(late, 1).Round(time.Millisecond))
			switch design {
			case "after":
				if lost != 0 {
					t.Errorf("%d instants lost with the timer queue", lost)
				}
			case "before":
				if lost == 0 {
					t.Errorf("the former design lost no instant: the emulated Scheduler's early fires did not bite")
				}
			}
		})
	}
}

// TestSweepFindsDroppedFires drops a third of the fires (their events
// dead-lettered) and checks that the sweep still lapses every expectation.
func TestSweepFindsDroppedFires(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits for the sweep behind a third of the fires dropped; the full run checks it")
	}
	p := 2 * time.Second
	faults := FaultsFor(p)
	faults.Drop, faults.Seed = 0.34, 7
	e := startPrecision(t, p, faults, true)
	// The lead leaves the stream consumer time to create every schedule
	// before its instant even on a loaded machine: a schedule created after
	// its instant is never fired (nor dropped), and the test would check
	// nothing.
	late, lost := e.lateness(t, 30, 5*p+5*time.Second, 2*p, 2*time.Minute)
	t.Logf("a third of the fires dropped: lost %d; lateness p50 %s, max %s", lost, quantile(late, 0.5).Round(time.Millisecond), quantile(late, 1).Round(time.Millisecond))
	if lost != 0 {
		t.Fatalf("%d instants lost with the sweep on", lost)
	}
	if st := e.local.SchedulerStats(); st.Dropped == 0 {
		t.Errorf("emulated Scheduler %+v: no fire was dropped", st)
	}
}
