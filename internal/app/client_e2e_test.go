package app

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/expect"
)

// goClient is the public Go client of the environment's server, as an
// agent would hold it.
func (e *testEnv) goClient(token string) *client.Client {
	e.t.Helper()
	c, err := client.New(e.srv.URL, client.Options{Token: token, BaseDelay: 10 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// scenarioGoClient runs both protocols through the public Go client: an
// agent registers its card, raises an expectation that lapses to it and one
// that a fact satisfies, reads the records back page by page; a bad raise
// and a foreign token come back as *client.Error naming the field and the
// status; an ANTICIPATE signed with client.Sign is graded after a plan
// reported through AppendEvent.
func scenarioGoClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t)
	c := e.goClient(adminToken)
	ag := register(t, e, "1.0")
	card, err := c.Card(ctx, agentID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutCard(ctx, agentID, card); err != nil {
		t.Fatal(err)
	}

	exp := func(id string, due time.Duration) client.Expectation {
		return client.Expectation{ExpectationID: id, Kind: "payment", Subject: client.Subject{Type: "invoice", ID: "42"},
			Expects: "invoice 42 is paid", SatisfiedBy: client.SatisfiedBy{FactKey: "invoice.42." + id}, DueAt: ts(due), Basis: "contract"}
	}
	recs, err := c.Raise(ctx, agentID, client.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1",
		Expectations: []client.Expectation{exp("lapses", 1500*time.Millisecond), exp("kept", time.Hour)}})
	if err != nil || len(recs) != 2 || recs[0].State != client.StateOpen {
		t.Fatalf("raise: %v %+v", err, recs)
	}
	out, err := c.ReportFacts(ctx, agentID, client.Fact{FactKey: "invoice.42.kept", ObservedAt: ts(0)})
	if err != nil || !slices.Equal(out[0].Satisfied, []string{"kept"}) {
		t.Fatalf("fact: %v %+v", err, out)
	}

	msgs := ag.WaitFor(1, 20*time.Second)
	var lapsed *client.Record
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if lapsed, err = c.Expectation(ctx, agentID, "lapses"); err != nil {
			t.Fatal(err)
		}
		if lapsed.LapseTaskID != "" {
			break
		}
	}
	if lapsed.State != client.StateLapsed || lapsed.Lapse == nil || lapsed.Lapse.Lapse != string(expect.Overdue) ||
		lapsed.Delivery == nil || lapsed.Delivery.MessageID != msgs[0].MessageID {
		t.Fatalf("lapsed record: %+v (delivery %+v), message %s", lapsed, lapsed.Delivery, msgs[0].MessageID)
	}
	// Listings read an index that lags on DynamoDB: read every page again
	// until both records show their final states.
	var states []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		states = states[:0]
		opts := client.ListOptions{SubjectType: "invoice", SubjectID: "42", Limit: 1}
		for {
			page, err := c.ListExpectations(ctx, agentID, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				states = append(states, r.Expectation.ExpectationID+":"+r.State)
			}
			if opts.NextToken = page.NextToken; opts.NextToken == "" {
				break
			}
		}
		slices.Sort(states)
		if slices.Equal(states, []string{"kept:satisfied", "lapses:lapsed"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing: %v", states)
		}
	}

	var pe *client.Error
	bad := exp("bad", time.Hour)
	bad.Grace = "two hours"
	if _, err := c.Raise(ctx, agentID, client.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: []client.Expectation{bad}}); !errors.As(err, &pe) || pe.Status != 400 {
		t.Fatalf("bad grace: %v", err)
	} else if _, ok := pe.Field("expectations[0].grace"); !ok {
		t.Fatalf("bad grace does not name expectations[0].grace: %+v", pe.Fields)
	}
	if _, err := e.goClient(otherToken).Expectation(ctx, agentID, "kept"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("a token for another agent: %v", err)
	}

	// The evaluation loop: the seed, signed by the client.
	ant := seedMessage(t)
	ant["anticipation_id"], ant["plan_id"] = "ant-go", "plan-go"
	signed, err := client.Sign(ant)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.DeclareAnticipation(ctx, signed); err != nil || !d.Created {
		t.Fatalf("declare: %v %+v", err, d)
	}
	events := []*client.Event{
		{MessageType: "TOOL_REQUEST", EventID: "e1", Timestamp: ts(0), Tool: "iam_create_user"},
		{MessageType: "STEP_COMPLETE", EventID: "e2", Timestamp: ts(0)},
		{MessageType: "OUTCOME", EventID: "e3", Timestamp: ts(0), Variables: map[string]any{"target_username": "alice"}, Observations: []client.Observation{
			{Call: "user_exists", Args: []any{"alice"}, Value: true}, {Call: "group_member", Args: []any{"alice", "engineering"}, Value: true},
			{Call: "policy_count", Args: []any{"alice"}, Value: 3}, {Call: "group_policy_count", Args: []any{"engineering"}, Value: 3}}},
		{MessageType: "PLAN_COMPLETE", EventID: "e4", Timestamp: ts(0)},
	}
	for _, ev := range events {
		if _, err := c.AppendEvent(ctx, "plan-go", ev); err != nil {
			t.Fatalf("event %s: %v", ev.EventID, err)
		}
	}
	var vs []client.Verification
	for deadline := time.Now().Add(20 * time.Second); len(vs) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if vs, err = c.Verifications(ctx, "ant-go"); err != nil {
			t.Fatal(err)
		}
	}
	if len(vs) != 1 || vs[0].Verdict != "PASS" {
		t.Fatalf("verifications: %+v", vs)
	}
	page, err := c.ListEvents(ctx, "plan-go", client.EventsOptions{})
	if err != nil || len(page.Events) != 4 || page.Events[3].Digest != vs[0].ExecutionDigest {
		t.Fatalf("events: %v %+v", err, page)
	}

	// Heartbeats, and the 400 that names a field.
	hb, err := c.PutHeartbeat(ctx, agentID, "nightly", client.HeartbeatSpec{Kind: "payment", Cron: "0 2 * * *", Timezone: "Europe/Riga", Grace: "PT1H"})
	if err != nil || hb.Status != "new" {
		t.Fatalf("put heartbeat: %v %+v", err, hb)
	}
	var apiErr *client.Error
	if _, err := c.PutHeartbeat(ctx, agentID, "nightly", client.HeartbeatSpec{Kind: "payment", Every: "5m"}); !errors.As(err, &apiErr) || apiErr.Status != 400 || !slices.ContainsFunc(apiErr.Fields, func(f client.FieldError) bool { return f.Path == "every" }) {
		t.Fatalf("a bad every: %v", err)
	}
	if hb, err = c.Ping(ctx, agentID, "nightly", client.PingStart); err != nil || hb.Status != "started" {
		t.Fatalf("start: %v %+v", err, hb)
	}
	if hb, err = c.Ping(ctx, agentID, "nightly", client.PingSuccess); err != nil || hb.Status != "up" || hb.NextDueAt == "" {
		t.Fatalf("ping: %v %+v", err, hb)
	}
	if hb, err = c.PauseHeartbeat(ctx, agentID, "nightly"); err != nil || hb.Status != "paused" {
		t.Fatalf("pause: %v %+v", err, hb)
	}
	if hb, err = c.ResumeHeartbeat(ctx, agentID, "nightly"); err != nil || hb.Status != "up" {
		t.Fatalf("resume: %v %+v", err, hb)
	}
	if hbs, err := c.ListHeartbeats(ctx, agentID, 10, ""); err != nil || len(hbs.Heartbeats) != 1 {
		t.Fatalf("list heartbeats: %v %+v", err, hbs)
	}
	if err := c.DeleteHeartbeat(ctx, agentID, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, agentID, "nightly"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("a deleted heartbeat: %v", err)
	}

	// A review queue: a plan's HUMAN criterion is reviewed by alice.
	if _, err := c.PutReviewQueue(ctx, "client-q", client.ReviewQueueRequest{}); !errors.As(err, &apiErr) || apiErr.Status != 400 ||
		!slices.ContainsFunc(apiErr.Fields, func(f client.FieldError) bool { return f.Path == "reviewers" }) {
		t.Fatalf("a queue without reviewers: %v", err)
	}
	if q, err := c.PutReviewQueue(ctx, "client-q", client.ReviewQueueRequest{Reviewers: []string{"alice"}, Due: "PT1H"}); err != nil || q.ReviewsPerItem != 1 || q.Resolve != "majority" {
		t.Fatalf("put review queue: %v %+v", err, q)
	}
	e.must(201, e.call("POST", "/v1/anticipations", queuedAnticipation(t, "ant-gc", "plan-gc", "client-q")))
	runPlan(t, e, "plan-gc", 2, nil, allGood())
	alice := e.goClient(aliceToken)
	var items *client.ReviewItemsPage
	for deadline := time.Now().Add(30 * time.Second); items == nil || len(items.Items) == 0; time.Sleep(50 * time.Millisecond) {
		if items, err = alice.ReviewItems(ctx, "client-q", client.ReviewItemsQuery{Assignee: "me"}); err != nil || time.Now().After(deadline) {
			t.Fatalf("alice's inbox: %v %+v", err, items)
		}
	}
	if _, err := alice.SubmitReview(ctx, "client-q", items.Items[0].ItemID, "tone", "SOSO", ""); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Fatalf("a bad grade: %v", err)
	}
	if it, err := alice.SubmitReview(ctx, "client-q", items.Items[0].ItemID, "tone", 0.75, "polite"); err != nil || it.State != "done" || it.Resolved["tone"].Score != 0.75 {
		t.Fatalf("review: %v %+v", err, it)
	}
	if it, err := c.ReviewItem(ctx, "client-q", items.Items[0].ItemID); err != nil || len(it.Reviews) != 1 {
		t.Fatalf("review item: %v %+v", err, it)
	}
	if ag, err := c.ReviewAgreement(ctx, "client-q"); err != nil || ag.QueueID != "client-q" {
		t.Fatalf("agreement: %v %+v", err, ag)
	}
	if qs, err := c.ListReviewQueues(ctx); err != nil || len(qs) != 1 {
		t.Fatalf("list review queues: %v %+v", err, qs)
	}
	if err := c.DeleteReviewQueue(ctx, "client-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReviewQueue(ctx, "client-q"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("a deleted queue: %v", err)
	}
}
