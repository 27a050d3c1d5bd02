package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// onTable reports whether the emulator's table holds key at all, expired
// or not (the adapter hides an expired item at once; Time to Live deletes
// it later).
func (e *testEnv) onTable(key store.Key) bool {
	e.t.Helper()
	ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: emulatorEndpoint})
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := dynamodb.NewFromConfig(ac).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key.PK}, "sk": &types.AttributeValueMemberS{Value: key.SK}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(out.Item) > 0
}

// waitDeletedFromTable waits until the emulator's table no longer holds key.
func (e *testEnv) waitDeletedFromTable(key store.Key, deadline time.Time) {
	e.t.Helper()
	for {
		if !e.onTable(key) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Time to Live never deleted %s", key)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scenarioRetention: with -retain-expectations 3s, a satisfied expectation
// is gone from GET and from the listing within seconds of its expiry while
// an open one raised before it stays, and its fact key matches nothing
// new; with -retain-evidence 3s a completed plan's VERIFY, events, bundle
// and ANTICIPATE are gone. The AWS mode runs it against the emulator's
// Time to Live, whose REMOVE records the stream function ignores.
func scenarioRetention(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Rules = expect.DefaultConfig()
		c.Rules.Retain = 3 * time.Second
		c.RetainEvidence = 3 * time.Second
	})
	register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("kept-open", ts(time.Hour)))))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("done", ts(time.Hour)))))
	var out struct {
		Facts []struct{ Satisfied []string }
	}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.done", ts(0))}})).json(t, &out)
	if len(out.Facts) != 1 || len(out.Facts[0].Satisfied) != 1 {
		t.Fatalf("the fact satisfied %+v", out)
	}
	done := e.record(agentID, "done")
	at, err := expect.ParseTime(done.ExpiresAt)
	if err != nil || at.Before(time.Now()) || at.After(time.Now().Add(4*time.Second)) {
		t.Fatalf("a satisfied record's expiresAt is %q, want about 3 s from now", done.ExpiresAt)
	}
	if open := e.record(agentID, "kept-open"); open.ExpiresAt != "" {
		t.Fatalf("an open record expires: %q", open.ExpiresAt)
	}

	// Evidence: a plan run to its VERIFY.
	var seed map[string]any
	_ = json.Unmarshal(variant(t, "x", "x"), &seed)
	registerAs(t, e, seed["agent_id"].(string))
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-kept", "plan-kept")))
	runPlan(t, e, "plan-kept", 3, nil, allGood())
	v := e.waitVerification("ant-kept")
	e.must(200, e.call("GET", "/v1/verifications/"+v.VerificationID+"/bundle", nil))
	firstEvent := store.Key{PK: "PLAN#" + store.KeyPart(seed["agent_id"].(string)) + "#plan-kept", SK: "EV#000000000001"}
	if e.aws && !e.onTable(firstEvent) {
		t.Fatalf("no item %s: the test looks for the wrong key", firstEvent)
	}

	deadline := time.Now().Add(15 * time.Second)
	for e.call("GET", "/v1/agents/"+agentID+"/expectations/done", nil).status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the satisfied expectation is still read 15 s after it was satisfied (retention 3 s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations", nil)); strings.Contains(string(r.body), `"done"`) || !strings.Contains(string(r.body), `"kept-open"`) {
		t.Fatalf("the listing after the expiry: %s", r.body)
	}
	if r := e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations/kept-open", nil)); !strings.Contains(string(r.body), `"open"`) {
		t.Fatalf("the open expectation after the other's expiry: %s", r.body)
	}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.done", ts(0))}})).json(t, &out)
	if len(out.Facts[0].Satisfied) != 0 {
		t.Fatalf("the expired expectation's fact key matched %v", out.Facts[0].Satisfied)
	}

	for e.call("GET", "/v1/verifications/"+v.VerificationID, nil).status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the VERIFY is still read 15 s after its plan completed (retention 3 s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.must(404, e.call("GET", "/v1/verifications/"+v.VerificationID+"/bundle", nil))
	e.must(404, e.call("GET", "/v1/executions/plan-kept/events", nil))
	e.must(404, e.call("GET", "/v1/anticipations/ant-kept", nil))
	if r := e.must(200, e.call("GET", "/v1/agents/"+seed["agent_id"].(string)+"/anticipations", nil)); strings.Contains(string(r.body), "ant-kept") {
		t.Fatalf("the expired ANTICIPATE is still listed: %s", r.body)
	}
	if e.aws {
		// The emulator's Time to Live deletes the items (its REMOVE
		// records reach the stream function, which ignores them), and
		// the open expectation stays.
		e.waitDeletedFromTable(watcher.ExpectationKey(agentID, "done"), deadline.Add(15*time.Second))
		// The plan's first event, stored long before PLAN_COMPLETE, was
		// given the plan's expiry too.
		e.waitDeletedFromTable(firstEvent, deadline.Add(15*time.Second))
		e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations/kept-open", nil))
	}
}

// scenarioIDReusedAfterExpiry: an anchor expires while its dependent stays
// open (retention 2 s); its id, forgotten, is raised again, and that new
// expectation's satisfaction neither re-anchors the old dependent nor is
// skipped by it. (Found by a second tenant's probe of retention.)
func scenarioIDReusedAfterExpiry(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Rules = expect.DefaultConfig()
		c.Rules.Retain = 2 * time.Second
	})
	register(t, e, "1.0")
	projected := ts(48 * time.Hour)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("ship", ts(time.Hour)),
		payment("deliver", projected, func(m map[string]any) {
			m["anchor"] = map[string]any{"expectationId": "ship", "offset": "PT2H"}
			m["after"] = []any{"ship"}
		}),
	)))
	shipped := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.ship", expect.FormatTime(shipped))}}))
	d := e.waitRecord(agentID, "deliver", func(r *expect.Record) bool { return r.DueAt != projected })
	deadline := time.Now().Add(15 * time.Second)
	for e.call("GET", "/v1/agents/"+agentID+"/expectations/ship", nil).status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("ship never expired")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(1100 * time.Millisecond) // the new ship is raised in a later second than deliver
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("ship", ts(10*time.Hour)))))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.ship", ts(0))}}))
	time.Sleep(2 * time.Second) // the change feed's re-anchoring, had there been any
	if d2 := e.record(agentID, "deliver"); d2.DueAt != d.DueAt || d2.State != expect.StateOpen {
		t.Fatalf("the old dependent moved with the new 'ship': due %s -> %s, %s", d.DueAt, d2.DueAt, d2.State)
	}
}
