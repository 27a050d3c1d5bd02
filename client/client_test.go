package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

const testToken = "client-test-token"

// startServer serves the embedded default's real handler on loopback and
// returns its URL.
func startServer(t testing.TB) string {
	t.Helper()
	authn, err := auth.New([]auth.TokenSpec{{Token: testToken, Principal: "client-test", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(app.Config{DataDir: t.TempDir(), Auth: authn, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), AllowPrivateAgents: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	return srv.URL
}

func testCard(url string) map[string]any {
	return map[string]any{"name": "client-test", "description": "client test agent", "version": "1",
		"supportedInterfaces": []any{map[string]any{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{"uri": expect.URI, "params": map[string]any{
			"keepsTime": false, "lapseSkill": "lapse",
			"kinds": []any{map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "An invoice is paid", "basis": "contract"}}}}}},
		"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []any{map[string]any{"id": "lapse", "name": "lapse", "description": "handles lapses", "tags": []string{"lapse"}}}}
}

func payment(id, due string) client.Expectation {
	return client.Expectation{ExpectationID: id, Kind: "payment", Subject: client.Subject{Type: "invoice", ID: id},
		Expects: id + " is paid", SatisfiedBy: client.SatisfiedBy{FactKey: id + ".paid"}, DueAt: due, Basis: "contract"}
}

func newClient(t testing.TB, url string, opts client.Options) *client.Client {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	c, err := client.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEveryRoute calls every route of the API through the client against
// the embedded server and checks each typed answer.
func TestEveryRoute(t *testing.T) {
	ctx := context.Background()
	url := startServer(t)
	c := newClient(t, url, client.Options{})

	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	doc, err := c.OpenAPI(ctx)
	if err != nil || !bytes.Contains(doc, []byte(`"openapi"`)) {
		t.Fatalf("openapi: %v %.80s", err, doc)
	}
	const agent = "agent/one" // a slash in an id is escaped in the path
	if _, err := c.Card(ctx, agent); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("card before put: %v, want 404", err)
	}
	card, err := c.PutCard(ctx, agent, testCard("http://127.0.0.1:9/"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Card(ctx, agent)
	if err != nil || !bytes.Equal(got, card) {
		t.Fatalf("card: %v\n%s\n%s", err, got, card)
	}

	due := expect.FormatTime(time.Now().Add(240 * time.Hour))
	req := client.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: []client.Expectation{payment("inv-1", due), payment("inv-2", due), payment("inv-3", due)}}
	req.Expectations[1].Grace = "PT2H"
	recs, err := c.Raise(ctx, agent, req)
	if err != nil || len(recs) != 3 || recs[0].State != client.StateOpen || recs[1].Expectation.Grace != "PT2H" || recs[0].AgentID != agent {
		t.Fatalf("raise: %v %+v", err, recs)
	}
	again, err := c.Raise(ctx, agent, req)
	if err != nil || again[0].RaisedAt != recs[0].RaisedAt {
		t.Fatalf("identical raise is not an idempotent retry: %v %+v", err, again)
	}
	changed := req
	changed.Expectations = []client.Expectation{payment("inv-1", expect.FormatTime(time.Now().Add(time.Hour)))}
	var pe *client.Error
	if _, err := c.Raise(ctx, agent, changed); !errors.As(err, &pe) || pe.Status != 409 || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("reused id: %v", err)
	}
	bad := req
	bad.Expectations = []client.Expectation{payment("inv-9", "tomorrow")}
	_, err = c.Raise(ctx, agent, bad)
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Type != "https://clockwork.dev/problems/invalid" || pe.Title != "Bad Request" || pe.Detail == "" {
		t.Fatalf("invalid raise: %#v", err)
	}
	if msg, ok := pe.Field("expectations[0].dueAt"); !ok || msg == "" {
		t.Fatalf("invalid raise does not name expectations[0].dueAt: %+v", pe.Fields)
	}

	rec, err := c.Expectation(ctx, agent, "inv-2")
	if err != nil || rec.Expectation.ExpectationID != "inv-2" || rec.TaskID != "task-1" {
		t.Fatalf("get: %v %+v", err, rec)
	}
	if _, err := c.Expectation(ctx, agent, "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}

	out, err := c.ReportFacts(ctx, agent, client.Fact{FactKey: "inv-1.paid", ObservedAt: expect.FormatTime(time.Now())})
	if err != nil || len(out) != 1 || !slices.Equal(out[0].Satisfied, []string{"inv-1"}) {
		t.Fatalf("facts: %v %+v", err, out)
	}
	// The same fact again (a retried report) changes nothing.
	if again, err := c.ReportFacts(ctx, agent, client.Fact{FactKey: "inv-1.paid", ObservedAt: expect.FormatTime(time.Now())}); err != nil || len(again) != 1 || len(again[0].Satisfied) != 0 {
		t.Fatalf("fact again: %v %+v", err, again)
	}
	wd, err := c.Withdraw(ctx, agent, "no longer needed", "inv-3")
	if err != nil || len(wd) != 1 || wd[0].State != client.StateWithdrawn || wd[0].WithdrawnReason != "no longer needed" {
		t.Fatalf("withdraw: %v %+v", err, wd)
	}
	if _, err := c.Withdraw(ctx, agent, "", "inv-1"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("withdrawing a satisfied one: %v", err)
	}

	// Paging: one record a page until NextToken is empty.
	var seen []string
	opts := client.ListOptions{SubjectType: "invoice", Limit: 1}
	for {
		page, err := c.ListExpectations(ctx, agent, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			seen = append(seen, r.Expectation.ExpectationID+":"+r.State)
		}
		if page.NextToken == "" {
			break
		}
		opts.NextToken = page.NextToken
	}
	slices.Sort(seen)
	if want := []string{"inv-1:satisfied", "inv-2:open", "inv-3:withdrawn"}; !slices.Equal(seen, want) {
		t.Fatalf("listing: %v, want %v", seen, want)
	}
	open, err := c.ListExpectations(ctx, agent, client.ListOptions{State: client.StateOpen})
	if err != nil || len(open.Records) != 1 || open.Records[0].Expectation.ExpectationID != "inv-2" {
		t.Fatalf("open listing: %v %+v", err, open)
	}

	push := map[string]any{"message": map[string]any{"messageId": "m-1", "taskId": "task-2", "contextId": "ctx-2", "role": "ROLE_AGENT",
		"metadata": map[string]any{expect.URI: map[string]any{"expectations": []any{payment("inv-4", due)}, "facts": []any{client.Fact{FactKey: "inv-2.paid", ObservedAt: expect.FormatTime(time.Now())}}}}}}
	res, err := c.PushA2A(ctx, agent, push)
	if err != nil || len(res.Raised) != 1 || res.Raised[0].TaskID != "task-2" || len(res.Facts) != 1 || !slices.Equal(res.Facts[0].Satisfied, []string{"inv-2"}) {
		t.Fatalf("a2a: %v %+v", err, res)
	}
	if _, err := c.Redeliver(ctx, agent, "inv-4"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("redeliver of an open expectation: %v", err)
	}
	if _, err := c.Acknowledge(ctx, agent, "inv-4", "nothing lapsed"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("acknowledging an open expectation: %v", err)
	}
	dead, err := c.DeadLetters(ctx)
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead letters: %v %+v", err, dead)
	}

	// Credentials: the card declares no scheme, so any is refused naming it.
	_, err = c.PutCredentials(ctx, agent, map[string]client.Credential{"bearer": {Token: "secret"}})
	if !errors.As(err, &pe) || pe.Status != 400 {
		t.Fatalf("credentials for an undeclared scheme: %v", err)
	}
	if _, ok := pe.Field("credentials.bearer"); !ok {
		t.Fatalf("credentials error does not name credentials.bearer: %+v", pe.Fields)
	}
	names, err := c.Credentials(ctx, agent)
	if err != nil || len(names) != 0 {
		t.Fatalf("credentials: %v %v", err, names)
	}
	if err := c.DeleteCredentials(ctx, agent); err != nil {
		t.Fatal(err)
	}
	withScheme := testCard("http://127.0.0.1:9/")
	withScheme["securitySchemes"] = map[string]any{"bearer": map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer"}}}
	withScheme["securityRequirements"] = []any{map[string]any{"schemes": map[string]any{"bearer": map[string]any{"list": []string{}}}}}
	if _, err := c.PutCard(ctx, agent, withScheme); err != nil {
		t.Fatal(err)
	}
	if names, err := c.PutCredentials(ctx, agent, map[string]client.Credential{"bearer": {Token: "secret"}}); err != nil || !slices.Equal(names, []string{"bearer"}) {
		t.Fatalf("put credentials: %v %v", err, names)
	}
	if names, err := c.Credentials(ctx, agent); err != nil || !slices.Equal(names, []string{"bearer"}) {
		t.Fatalf("credentials: %v %v", err, names)
	}

	// The evaluation loop.
	seed, err := os.ReadFile("../internal/anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var ant client.Anticipate
	if err := json.Unmarshal(seed, &ant); err != nil {
		t.Fatal(err)
	}
	ant.AnticipationID, ant.PlanID = "ant-client", "plan-client"
	signed, err := client.Sign(&ant)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.DeclareAnticipation(ctx, signed)
	if err != nil || !d.Created || d.AnticipationID != "ant-client" || d.Sealed {
		t.Fatalf("declare: %v %+v", err, d)
	}
	if d, err := c.DeclareAnticipation(ctx, signed); err != nil || d.Created {
		t.Fatalf("identical declaration: %v %+v", err, d)
	}
	ant.GradingPolicy.PassingThreshold = 0.6
	resigned, _ := client.Sign(ant)
	if _, err := c.ReplaceAnticipation(ctx, "ant-client", resigned); err != nil {
		t.Fatal(err)
	}
	ant.SessionID = "changed"
	if _, err := c.ReplaceAnticipation(ctx, "ant-client", ant); !errors.As(err, &pe) || pe.Status != 400 {
		t.Fatalf("unsigned replacement: %v", err)
	} else if _, ok := pe.Field("d_dna_signature"); !ok {
		t.Fatalf("unsigned replacement does not name d_dna_signature: %+v", pe.Fields)
	}
	stored, err := c.Anticipation(ctx, "ant-client")
	if err != nil || stored.Sealed || !bytes.Contains(stored.Anticipation, []byte(`"passing_threshold":0.6`)) {
		t.Fatalf("anticipation: %v %+v", err, stored)
	}
	now := expect.FormatTime(time.Now())
	events := []any{
		&client.Event{MessageType: "TOOL_REQUEST", EventID: "e1", Timestamp: now, Tool: "iam_create_user", Arguments: json.RawMessage(`{"user":"alice"}`)},
		json.RawMessage(`{"message_type":"TOOL_RESULT","event_id":"e2","timestamp":"` + now + `","tool":"iam_create_user","status":"SUCCESS","trace_id":"kept"}`),
		&client.Event{MessageType: "OUTCOME", EventID: "e3", Timestamp: now, Variables: map[string]any{"target_username": "alice"},
			Observations: []client.Observation{{Call: "user_exists", Args: []any{"alice"}, Value: true}}},
		&client.Event{MessageType: "PLAN_COMPLETE", EventID: "e4", Timestamp: now},
	}
	for i, ev := range events {
		ap, err := c.AppendEvent(ctx, "plan-client", ev)
		if err != nil || ap.Seq != i+1 {
			t.Fatalf("event %d: %v %+v", i, err, ap)
		}
	}
	if ap, err := c.AppendEvent(ctx, "plan-client", events[0]); err != nil || ap.Seq != 1 {
		t.Fatalf("repeated event is not idempotent: %v %+v", err, ap)
	}
	if _, err := c.AppendEvent(ctx, "plan-client", &client.Event{MessageType: "STEP_COMPLETE", EventID: "e5", Timestamp: now}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("event after PLAN_COMPLETE: %v", err)
	}
	var chain []client.StoredEvent
	eo := client.EventsOptions{Limit: 3}
	for {
		page, err := c.ListEvents(ctx, "plan-client", eo)
		if err != nil {
			t.Fatal(err)
		}
		if !page.Execution.Completed || page.Execution.Count != 4 || page.Execution.Aggregate.ToolCounts["iam_create_user"] != 1 {
			t.Fatalf("execution: %+v", page.Execution)
		}
		chain = append(chain, page.Events...)
		if page.NextToken == "" {
			break
		}
		eo.NextToken = page.NextToken
	}
	if len(chain) != 4 || chain[1].MessageType != "TOOL_RESULT" || !bytes.Contains(chain[1].Event, []byte(`"trace_id":"kept"`)) || chain[1].Prev != chain[0].Digest {
		t.Fatalf("chain: %+v", chain)
	}

	var vs []client.Verification
	for deadline := time.Now().Add(20 * time.Second); len(vs) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if vs, err = c.Verifications(ctx, "ant-client"); err != nil {
			t.Fatal(err)
		}
	}
	if len(vs) != 1 || vs[0].MessageType != "VERIFY" || len(vs[0].Results) != 5 || vs[0].ExecutionDigest != chain[3].Digest {
		t.Fatalf("verifications: %+v", vs)
	}
	v, err := c.Verification(ctx, vs[0].VerificationID)
	if err != nil || v.DDNASignature != vs[0].DDNASignature || v.ServerSignature == "" {
		t.Fatalf("verification: %v %+v", err, v)
	}
	if _, err := c.SubmitGrade(ctx, v.VerificationID, client.Grade{CriterionID: "oc-001", Score: 1}); !errors.As(err, &pe) || pe.Status/100 != 4 {
		t.Fatalf("a human grade of a DETERMINISTIC criterion: %v", err)
	}
	var bundle bytes.Buffer
	if err := c.Bundle(ctx, v.VerificationID, &bundle); err != nil || !json.Valid(bundle.Bytes()) || !bytes.Contains(bundle.Bytes(), []byte(v.DDNASignature)) {
		t.Fatalf("bundle: %v %.200s", err, bundle.Bytes())
	}
	key, err := c.VerifyKey(ctx)
	if err != nil || key.Alg != "Ed25519" || key.PublicKey == "" {
		t.Fatalf("verify key: %v %+v", err, key)
	}

	// Authentication errors.
	anon := newClient(t, url, client.Options{Token: "wrong"})
	if _, err := anon.Card(ctx, agent); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("unknown token: %v", err)
	}
	if err := anon.Health(ctx); err != nil {
		t.Fatalf("health needs no token: %v", err)
	}
}

func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.Options{Token: os.Getenv("CLOCKWORK_TOKEN")})
	if err != nil {
		panic(err)
	}
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	_, err = c.Raise(ctx, "demo-agent", client.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1",
		Expectations: []client.Expectation{{ExpectationID: "inv-43-paid", Kind: "payment",
			Subject: client.Subject{Type: "invoice", ID: "43"}, Expects: "invoice 43 is paid",
			SatisfiedBy: client.SatisfiedBy{FactKey: "invoice.43.paid"}, DueAt: due, Grace: "PT2H", Basis: "contract"}}})
	var problem *client.Error
	switch {
	case errors.As(err, &problem) && problem.Status == 400:
		for _, f := range problem.Fields {
			fmt.Printf("%s: %s\n", f.Path, f.Message)
		}
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	out, err := c.ReportFacts(ctx, "demo-agent", client.Fact{FactKey: "invoice.43.paid", ObservedAt: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out[0].Satisfied)
	rec, err := c.Expectation(ctx, "demo-agent", "inv-43-paid")
	if errors.Is(err, client.ErrNotFound) {
		fmt.Println("no such expectation")
		return
	}
	if err == nil {
		fmt.Println(rec.State)
	}
}
