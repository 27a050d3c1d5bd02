package app

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// TestAWSModeRepairsDiscardedStreamRecords: the stream poller discards,
// as Lambda does after a record's retries or maximum age, the record of
// each change whose effects are not otherwise repaired: a PLAN_COMPLETE
// (its VERIFY), a lapse of an agent with alert rules (its notification), an
// anchor's satisfaction (its dependent's due time). Each effect still
// happens, from the change's marker, within a sweep period of the margin;
// the markers are cleared after. A task's cancellation needs no stream
// record at all: it withdraws the task's expectations in its own request
// (a raise committing after its mark is refused, one before is found by
// its lookup), shown here with the records of the task's raises
// discarded.
func TestAWSModeRepairsDiscardedStreamRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the AWS mode runs against the emulator in the full run")
	}
	startEmulator(t)
	backendKind = "aws"
	defer func() { backendKind = "embedded" }()

	var mu sync.Mutex
	discarded := map[string]bool{}
	discard := func(ch store.Change) bool {
		if ch.New == nil {
			return false
		}
		var old []byte
		if ch.Old != nil {
			old = ch.Old.Data
		}
		what := ""
		switch ch.Type() {
		case "execution":
			if len(effects.Of(ch.Type(), old, ch.New.Data)) > 0 {
				what = "plan completed"
			}
		case "expectation":
			switch {
			case len(effects.Of(ch.Type(), old, ch.New.Data)) > 0 && strings.Contains(string(ch.New.Data), `"lapse":`) && !strings.Contains(string(old), `"lapse":`):
				what = "lapse"
			case strings.Contains(string(ch.New.Data), `"expectationId":"anchor"`) && strings.Contains(string(ch.New.Data), `"satisfiedBy":`) && !strings.Contains(string(old), `"satisfiedBy":`):
				what = "anchor satisfied"
			case ch.Old == nil && strings.Contains(string(ch.New.Data), `"taskId":"task-cancelled"`):
				what = "raised on a task then cancelled"
			}
		}
		if what == "" {
			return false
		}
		mu.Lock()
		discarded[what] = true
		mu.Unlock()
		return true
	}
	e := newEnv(t)
	e.discardStream = discard
	e.restart()
	t.Cleanup(e.stop)

	register(t, e, "1.0")
	secret := alert.NewWebhookSecret()
	hook := webhookReceiver(t, secret)
	e.must(201, e.call("PUT", "/v1/channels/repair-hook", map[string]any{"type": "webhook", "url": hook.srv.URL + "/hook", "secret": secret}))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"repair-hook"}}}}))

	// A lapse whose stream record is discarded: its notification still goes.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("lapser", ts(200*time.Millisecond)))))
	// An anchor satisfied, the record of that discarded: its dependent is
	// still re-anchored.
	projected := ts(48 * time.Hour)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("anchor", ts(time.Hour)),
		payment("dependent", projected, func(m map[string]any) { m["anchor"] = map[string]any{"expectationId": "anchor", "offset": "PT2H"} }),
	)))
	shipped := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.anchor", expect.FormatTime(shipped))}}))
	// A task cancelled, the records of its raises discarded: its
	// expectations are withdrawn all the same.
	onTask := raiseBody(payment("on-task", ts(time.Hour)))
	onTask["taskId"] = "task-cancelled"
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", onTask))
	cancel := map[string]any{"statusUpdate": map[string]any{"taskId": "task-cancelled", "contextId": "ctx-1", "status": map[string]any{"state": "TASK_STATE_CANCELED"}}}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/a2a", cancel))
	if r := e.record(agentID, "on-task"); r.State != expect.StateWithdrawn {
		t.Fatalf("an expectation of a cancelled task: %s", r.State)
	}
	// A plan completed, its PLAN_COMPLETE's record discarded: still verified.
	body := variant(t, "ant-repair", "plan-repair")
	e.must(201, e.call("POST", "/v1/anticipations", body))
	var declared struct {
		Digest string `json:"d_dna_signature"`
	}
	if err := json.Unmarshal(body, &declared); err != nil {
		t.Fatal(err)
	}
	runPlan(t, e, "plan-repair", 2, nil, allGood())
	completed := time.Now()

	vid := anticipate.VerificationIDFor(declared.Digest, "plan-repair")
	for deadline := completed.Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := e.call("GET", "/v1/verifications/"+vid, nil); r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no VERIFY 30 s after a PLAN_COMPLETE whose stream record was discarded")
		}
	}
	t.Logf("VERIFY %s after PLAN_COMPLETE (its stream record discarded)", time.Since(completed).Round(100*time.Millisecond))
	d := e.waitRecord(agentID, "dependent", func(r *expect.Record) bool { return r.DueAt != projected })
	if d.DueAt != expect.FormatTime(shipped.Add(2*time.Hour)) {
		t.Fatalf("dependent re-anchored to %s, want %s", d.DueAt, expect.FormatTime(shipped.Add(2*time.Hour)))
	}
	hook.waitFor("the lapse's notification", func(got []map[string]any) bool { return count(got, ofType(alert.Lapsed)) == 1 })
	mu.Lock()
	if len(discarded) != 4 {
		t.Fatalf("discarded the records of %v, want a lapse, an anchor satisfied, a raise on a cancelled task and a plan completed", discarded)
	}
	mu.Unlock()
	// Every marker is cleared once its effects are done.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := 0
		if err := effects.Pending(e.t.Context(), e.rt.Store, time.Now().Add(time.Hour), 0, 1000, func(store.Key, effects.Marker) error { left++; return nil }); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d effect markers left", left)
		}
	}
}
