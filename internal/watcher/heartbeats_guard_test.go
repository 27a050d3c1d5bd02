package watcher

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
)

// TestHeartbeatPeriodsOnlyThroughTheirRoutes: a period cannot be closed,
// superseded, skipped or have its origin task canceled by the ordinary
// routes (a heartbeat would then watch nothing), each refused with 400
// naming the field; and raising an existing period's id tells nothing more
// than raising an unknown one.
func TestHeartbeatPeriodsOnlyThroughTheirRoutes(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "nightly", heartbeat.Spec{Kind: "payment", Every: "PT1H"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PingHeartbeat(ctx, "agent-1", "nightly", "job", heartbeat.Success); err != nil {
		t.Fatal(err)
	}
	field := func(err error) string {
		if e, ok := err.(*errs.Error); ok && e.Code == errs.Invalid && len(e.Fields) > 0 {
			return e.Fields[0].Path
		}
		return fmt.Sprintf("not a field error: %v", err)
	}
	raise := func(mut func(*expect.Expectation), taskID string) error {
		_, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: taskID, ContextID: "c", Expectations: []expect.Expectation{
			paymentExpectation("mine", clock.now().Add(time.Hour), func(e *expect.Expectation) { e.Subject = expect.Subject{Type: "invoice", ID: "nightly"}; mut(e) })}})
		return err
	}
	_, werr := svc.Withdraw(ctx, "agent-1", []string{"hb:nightly:1"}, "")
	_, ferr := svc.ReportFacts(ctx, "agent-1", "x", []expect.Fact{{FactKey: "hb:nightly:1", ObservedAt: expect.FormatTime(clock.now())}})
	_, cerr := svc.TaskCanceled(ctx, "agent-1", "hb:nightly")
	for _, c := range []struct {
		what string
		err  error
		want string
	}{
		{"withdraw", werr, "withdraw[0]"},
		{"fact", ferr, "facts[0].factKey"},
		{"cancel", cerr, "taskId"},
		{"supersede", raise(func(e *expect.Expectation) { e.Supersedes = "hb:nightly:1" }, "t"), "expectations[0].supersedes"},
		{"after", raise(func(e *expect.Expectation) { e.After = []string{"hb:nightly:1"} }, "t"), "expectations[0].after[0]"},
		{"refute key", raise(func(e *expect.Expectation) { e.RefutedBy = &expect.RefutedBy{FactKey: "hb:nightly:1:fail"} }, "t"), "expectations[0].refutedBy.factKey"},
		{"task", raise(func(*expect.Expectation) {}, "hb:nightly"), "taskId"},
		{"existing period id", raise(func(e *expect.Expectation) { e.ExpectationID = "hb:nightly:1" }, "t"), "expectations[0].expectationId"},
		{"unknown period id", raise(func(e *expect.Expectation) { e.ExpectationID = "hb:nightly:99" }, "t"), "expectations[0].expectationId"},
	} {
		if got := field(c.err); got != c.want {
			t.Errorf("%s: %s, want a 400 naming %s", c.what, got, c.want)
		}
	}
	if r, _ := svc.Get(ctx, "agent-1", "hb:nightly:1"); r.State != expect.StateOpen {
		t.Fatalf("the period is %s", r.State)
	}
}

// TestHeartbeatConcurrentPings: pings at once each raise a period, none
// fails, and one period is open at the end.
func TestHeartbeatConcurrentPings(t *testing.T) {
	ctx := context.Background()
	svc, _, _ := newTestService(t, expect.DefaultConfig())
	if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "storm", heartbeat.Spec{Kind: "payment", Every: "PT1H"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sig := []heartbeat.Signal{heartbeat.Success, heartbeat.Start, heartbeat.Success, heartbeat.Fail}[i%4]
			if _, err := svc.PingHeartbeat(ctx, "agent-1", "storm", "job", sig); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("a concurrent ping failed: %v", err)
	}
	recs, _, err := svc.List(ctx, "agent-1", ListFilter{State: "open", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, r := range recs {
		if strings.HasPrefix(r.Expectation.ExpectationID, "hb:storm:") {
			open++
		}
	}
	if open > 1 {
		t.Fatalf("%d periods open after the storm", open)
	}
}

// TestHeartbeatBoundsUntilListingsAndKinds: a period or grace a ping
// could not raise is refused at the PUT; start, fail and resume raise
// nothing after until; listings never page over deleted heartbeats; a
// kind gone from the card is a conflict that says so.
func TestHeartbeatBoundsUntilListingsAndKinds(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	for _, c := range []struct {
		spec  heartbeat.Spec
		field string
	}{
		{heartbeat.Spec{Kind: "payment", Every: "P1000Y"}, "every"},
		{heartbeat.Spec{Kind: "payment", Every: "PT1H", Grace: "P2Y"}, "grace"},
	} {
		_, _, err := svc.PutHeartbeat(ctx, "agent-1", "big", c.spec)
		if e, ok := err.(*errs.Error); !ok || len(e.Fields) == 0 || e.Fields[0].Path != c.field {
			t.Errorf("%+v: %v, want a 400 naming %s", c.spec, err, c.field)
		}
	}
	past := expect.FormatTime(clock.now().Add(-time.Hour))
	if _, _, err := svc.PutHeartbeat(ctx, "agent-1", "over", heartbeat.Spec{Kind: "payment", Every: "PT1H", Until: past}); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []heartbeat.Signal{heartbeat.Start, heartbeat.Fail, heartbeat.Success} {
		if v, err := svc.PingHeartbeat(ctx, "agent-1", "over", "job", sig); err != nil || v.Period != 0 {
			t.Fatalf("%s after until: %+v %v", sig, v, err)
		}
	}
	svc.PauseHeartbeat(ctx, "agent-1", "over")
	if v, err := svc.ResumeHeartbeat(ctx, "agent-1", "over"); err != nil || v.Period != 0 {
		t.Fatalf("resume after until: %+v %v", v, err)
	}

	// Listings: deleted heartbeats leave no empty pages.
	for i := range 6 {
		name := fmt.Sprintf("h%d", i)
		if _, _, err := svc.PutHeartbeat(ctx, "agent-1", name, heartbeat.Spec{Kind: "payment", Every: "PT1H"}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := svc.DeleteHeartbeat(ctx, "agent-1", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	var names []string
	for next := ""; ; {
		page, tok, err := svc.ListHeartbeats(ctx, "agent-1", 1, next)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 && tok != "" {
			t.Fatalf("an empty page with a next token after %v", names)
		}
		for _, v := range page {
			names = append(names, v.Name)
		}
		if next = tok; next == "" {
			break
		}
	}
	if got := strings.Join(names, ","); got != "h1,h3,h5,over" {
		t.Fatalf("listed %s", got)
	}

	// The kind leaves the card.
	if _, err := svc.PingHeartbeat(ctx, "agent-1", "h1", "job", heartbeat.Success); err != nil {
		t.Fatal(err)
	}
	card := a2atest.NewAgent(t, "1.0").Card()
	card = []byte(strings.Replace(string(card), `"kind":"payment"`, `"kind":"payments"`, 1))
	if _, err := svc.PutCard(ctx, "agent-1", card); err != nil {
		t.Fatal(err)
	}
	_, err := svc.PingHeartbeat(ctx, "agent-1", "h1", "job", heartbeat.Success)
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "no longer declared") {
		t.Fatalf("a ping after the kind left the card: %v", err)
	}
}
