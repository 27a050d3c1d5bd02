package app

import (
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// scenarioAnchorsMetWhileTheClockFails: an anchor is satisfied while, on
// AWS, EventBridge Scheduler refuses every write (a sustained throttle,
// staged as about ten seconds for the five minutes): the schedule
// of its dependent's old due time cannot be deleted nor the new one
// created, so the change that re-anchors fails and is retried. The
// dependent must not lapse on its old due time (which passes meanwhile),
// and once Scheduler takes writes again it lapses on its re-anchored one.
// On the embedded default the same story runs without the fault (there
// is no Scheduler). Before, the Scheduler calls came before the
// re-anchoring in the change's processing, so a throttle that outlasted
// the stream's retries left the dependent on its old due time, to lapse
// "overdue" although its anchor was met.
func scenarioAnchorsMetWhileTheClockFails(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	oldDue := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("ship", ts(time.Hour)),
		payment("deliver", expect.FormatTime(oldDue), func(m map[string]any) { m["anchor"] = map[string]any{"expectationId": "ship", "offset": "PT15S"} }),
	)))
	time.Sleep(time.Second) // the raise's schedules are made
	var before dynamotest.FaultCounts
	if e.aws {
		on := dynamotest.DefaultFaults
		on.SchedulerThrottle = 1
		before = dynamotest.SetFaults(t, emulatorEndpoint, on)
		defer dynamotest.SetFaults(t, emulatorEndpoint, dynamotest.DefaultFaults)
	}
	shipped := time.Now().UTC().Truncate(time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.ship", expect.FormatTime(shipped))}}))
	newDue := shipped.Add(15 * time.Second)
	// The old due time passes, and the sweep's bound after it.
	time.Sleep(time.Until(oldDue.Add(awsTestSweepAfter + 2*time.Second)))
	d := e.record(agentID, "deliver")
	if d.State != expect.StateOpen || d.DueAt != expect.FormatTime(newDue) {
		t.Fatalf("deliver past its old due time with the clock failing: %s, due %s (want open, due %s)", d.State, d.DueAt, expect.FormatTime(newDue))
	}
	if e.aws {
		after := dynamotest.SetFaults(t, emulatorEndpoint, dynamotest.DefaultFaults)
		t.Logf("Scheduler refused %d writes while throttled", after.SchedulerThrottled-before.SchedulerThrottled)
		if after.SchedulerThrottled == before.SchedulerThrottled {
			t.Fatal("the staged throttle refused no Scheduler write")
		}
	}
	d = e.waitRecord(agentID, "deliver", func(r *expect.Record) bool { return r.State != expect.StateOpen })
	lapsed, _ := expect.ParseTime(d.Lapse.LapsedAt)
	if d.State != expect.StateLapsed || d.Lapse.Lapse != expect.Overdue || lapsed.Before(newDue) {
		t.Fatalf("deliver: %s %+v, want lapsed overdue at or after %s", d.State, d.Lapse, newDue)
	}
	t.Logf("deliver lapsed %s after its re-anchored due time", lapsed.Sub(newDue).Round(time.Millisecond))
}
