package lambdatest

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/console"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/mcpapi"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/agentclock/clockwork/internal/watcher"
)

// EnvGenerate names the variable that makes TestGenerateEvents rewrite the
// sample events:
//
//	CLOCKWORK_GENERATE_EVENTS=1 go test ./functions/lambdatest -run TestGenerateEvents -v
const EnvGenerate = "CLOCKWORK_GENERATE_EVENTS"

// TestGenerateEvents writes events/api, events/clock and events/stream.
//
// The API requests are built here (the ANTICIPATE signed with
// anticipate.Sign). They are then served in process by the same runtime
// the Lambdas assemble (awsrt on the moto emulator), through the same API
// Gateway adapter as functions/api; the clock events are the instants of
// the lapsing expectation, run through HandleClock; and the stream events
// are the records those writes produced on the table's DynamoDB stream,
// read with DynamoDB Streams and converted to the Lambda event shape,
// so that their images are exactly what the adapter writes. Every event is
// checked in process against the expected result it is written with.
func TestGenerateEvents(t *testing.T) {
	if os.Getenv(EnvGenerate) == "" {
		t.Skipf("set %s=1 to rewrite the sample events under events/", EnvGenerate)
	}
	ctx := context.Background()
	root := moduleRoot(t)

	// 1. API requests, and the authorizer's requests for their tokens.
	authzFiles, authzWant := authorizerEvents(t)
	apiEvs := apiEvents(t)
	apiWant := map[string]int{}
	var apiFiles []eventFile
	for i, e := range apiEvs {
		apiFiles = append(apiFiles, eventFile{Name: e.file, Body: e.encode(t, i)})
		apiWant[e.file] = e.status
	}

	// 2. Serve them in process on a fresh table.
	endpoint := dynamotest.Start(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := fmt.Sprintf("clockwork-events-%x", b)
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_REGION", "us-east-1")
	rt, err := awsrt.New(ctx, awsrt.Config{
		Table: table, ScheduleGroup: table, TimerQueueURL: timerQueue(t, endpoint, table),
		ClockFunctionARN: ClockFunctionARN, SchedulerRoleARN: SchedulerRoleARN, SchedulerDLQARN: SchedulerDLQARN,
		TrustAuthorizer: true, Endpoint: endpoint, AllowPrivateAgents: true, DeliveryAttempts: 8,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamo.CreateTable(ctx, rt.DynamoDB, table); err != nil {
		t.Fatal(err)
	}
	if err := rt.Clock.CreateGroup(ctx); err != nil {
		t.Fatal(err)
	}
	mcpapi.Mount(rt.API()) // as functions/api does
	rt.API().Console = console.Assets{}
	proxy := httpadapter.NewV2(rt.HTTP())
	for _, f := range apiFiles {
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(f.Body, &req); err != nil {
			t.Fatal(err)
		}
		resp, err := proxy.ProxyWithContext(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if resp.StatusCode != apiWant[f.Name] {
			t.Fatalf("%s: status %d, want %d: %s", f.Name, resp.StatusCode, apiWant[f.Name], resp.Body)
		}
	}

	// 3. Clock events: the instants of the lapsing expectation.
	rec, err := rt.Watcher.Get(ctx, AgentID, Lapsing)
	if err != nil {
		t.Fatal(err)
	}
	var clockFiles []eventFile
	clockWant := map[string]string{}
	for i, in := range expect.Instants(rec) {
		name := fmt.Sprintf("%02d-%s.json", i+1, in.Kind)
		clockFiles = append(clockFiles, eventFile{Name: name, Body: indent(t, in)})
		clockWant[name] = "ok"
		if err := rt.HandleClock(ctx, in); err != nil {
			t.Fatalf("clock %s: %v", name, err)
		}
	}
	if len(clockFiles) != 3 {
		t.Fatalf("%s has %d instants, want due, grace and horizon", Lapsing, len(clockFiles))
	}
	if rec, err = rt.Watcher.Get(ctx, AgentID, Lapsing); err != nil || rec.State != expect.StateLapsed {
		t.Fatalf("%s after its instants: %+v, %v; want lapsed", Lapsing, rec, err)
	}
	// A timer-queue batch (Lambda's SQS event) and the sweep.
	for _, ev := range clockExtraEvents(t, rt) {
		out, err := rt.HandleClockEvent(ctx, ev.Body)
		if err != nil {
			t.Fatalf("clock %s: %v", ev.Name, err)
		}
		if got := clockAnswer(out); got != ev.want {
			t.Fatalf("clock %s: answered %s, want %s", ev.Name, got, ev.want)
		}
		clockFiles = append(clockFiles, eventFile{Name: ev.Name, Body: ev.Body})
		clockWant[ev.Name] = ev.want
	}

	// 4. Stream events: the records those writes produced.
	recs := readStream(t, rt, table)
	pick := func(what string, match func(store.Change) bool) events.DynamoDBEventRecord {
		t.Helper()
		for _, r := range recs {
			ch, err := dynamo.ChangeFromRecord(r)
			if err != nil {
				t.Fatalf("stream record %s: %v", aws.ToString(r.Dynamodb.SequenceNumber), err)
			}
			if match(ch) {
				return toEventRecord(t, r)
			}
		}
		t.Fatalf("no stream record of %s among %d", what, len(recs))
		return events.DynamoDBEventRecord{}
	}
	expectation := func(ch store.Change, id string, old, new expect.State) bool {
		if ch.Type() != watcher.TypeExpectation || ch.Key != watcher.ExpectationKey(AgentID, id) {
			return false
		}
		state := func(it *store.Item) expect.State {
			if it == nil {
				return ""
			}
			r, err := watcher.DecodeRecord(*it)
			if err != nil {
				t.Fatal(err)
			}
			return r.State
		}
		return state(ch.Old) == old && state(ch.New) == new
	}
	created := pick("the creation of "+Scheduled, func(ch store.Change) bool {
		return expectation(ch, Scheduled, "", expect.StateOpen)
	})
	lapsed := pick("the lapse of "+Lapsing, func(ch store.Change) bool {
		return expectation(ch, Lapsing, expect.StateOpen, expect.StateLapsed)
	})
	completed := pick("the completion of "+PlanID, func(ch store.Change) bool {
		if ch.Type() != evaluation.TypeExecution || ch.New == nil {
			return false
		}
		var ex evaluation.Execution
		if err := json.Unmarshal(ch.New.Data, &ex); err != nil {
			t.Fatal(err)
		}
		return ex.PlanID == PlanID && ex.Completed
	})
	card := pick("the card of "+AgentID, func(ch store.Change) bool {
		return ch.Type() == watcher.TypeCard && ch.Old == nil
	})
	satisfied := pick("the satisfaction of inv-44-paid", func(ch store.Change) bool {
		return expectation(ch, "inv-44-paid", expect.StateOpen, expect.StateSatisfied)
	})
	poison := poisoned(t, satisfied)

	streamFiles := []eventFile{
		{Name: "01-expectation-created.json", Body: indent(t, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{created}})},
		{Name: "02-expectation-lapsed.json", Body: indent(t, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{lapsed}})},
		{Name: "03-execution-completed.json", Body: indent(t, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{completed}})},
		{Name: "04-agent-card.json", Body: indent(t, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{card}})},
		{Name: "05-poison-after-good.json", Body: indent(t, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{satisfied, poison}})},
	}
	streamWant := map[string][]string{}
	for _, f := range streamFiles {
		streamWant[f.Name] = []string{}
	}
	streamWant["05-poison-after-good.json"] = []string{poison.Change.SequenceNumber}
	for _, f := range streamFiles {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(f.Body, &ev); err != nil {
			t.Fatal(err)
		}
		resp, err := rt.HandleStream(ctx, ev)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if got := failures(resp); !slices.Equal(got, streamWant[f.Name]) {
			t.Fatalf("%s: batchItemFailures %v, want %v", f.Name, got, streamWant[f.Name])
		}
	}

	// 5. Write them.
	write := func(function string, files []eventFile, want any) {
		dir := filepath.Join(root, "events", function)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.Name), f.Body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "expected.json"), indent(t, want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d events and expected.json to %s", len(files), dir)
	}
	write("authorizer", authzFiles, authzWant)
	write("api", apiFiles, apiWant)
	write("clock", clockFiles, clockWant)
	write("stream", streamFiles, streamWant)
}

// timerQueue creates the timer queue of a table on the emulator and
// returns its URL.
func timerQueue(t *testing.T, endpoint, table string) string {
	t.Helper()
	q, err := awsrt.CreateTimerQueue(context.Background(), awsclient.NewSQSSender(dynamotest.Config(endpoint)), table+"-timers")
	if err != nil {
		t.Fatal(err)
	}
	return q.URL
}

// clockEvent is a sample clock event beyond the instants, with its
// expected answer (see clockAnswer).
type clockEvent struct {
	eventFile
	want string
}

// clockExtraEvents are the clock function's other triggers: a batch of the
// timer queue as Lambda's SQS event source mapping delivers it (an instant
// of the lapsing expectation, now a no-op; the due instant of the scheduled
// one, far ahead, which goes back on the queue; a body that is not an
// instant, dropped), answered with no batch item failure; and the sweep.
func clockExtraEvents(t *testing.T, rt *awsrt.Runtime) []clockEvent {
	t.Helper()
	lapsing, err := rt.Watcher.Get(context.Background(), AgentID, Lapsing)
	if err != nil {
		t.Fatal(err)
	}
	scheduled, err := rt.Watcher.Get(context.Background(), AgentID, Scheduled)
	if err != nil {
		t.Fatal(err)
	}
	grace := expect.Instant{AgentID: AgentID, ExpectationID: Lapsing, Kind: expect.InstantGrace, At: lapsing.GraceEnd()}
	ahead, _ := expect.NextInstant(scheduled)
	msg := func(id string, body []byte, sent string) events.SQSMessage {
		sum := md5.Sum(body)
		return events.SQSMessage{
			MessageId: id, ReceiptHandle: "AQEB" + strings.ReplaceAll(id, "-", "") + "==", Body: string(body), Md5OfBody: hex.EncodeToString(sum[:]),
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": sent, "SenderId": "AROAEXAMPLE:clockwork-stream",
				"ApproximateFirstReceiveTimestamp": sent},
			MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource:       "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:clockwork-timers", AWSRegion: "us-east-1",
		}
	}
	g, _ := json.Marshal(grace)
	a, _ := json.Marshal(ahead)
	batch := events.SQSEvent{Records: []events.SQSMessage{
		msg("6a1f0b5e-2f0c-4d8e-9a57-0c4b1a3f7d21", g, "1768467600000"),
		msg("0d9e8c7b-6a5f-4e3d-8c2b-1a0f9e8d7c6b", a, "1768467601000"),
		msg("f3e2d1c0-b9a8-4776-8554-433221100fed", []byte(`{"note":"not an instant"}`), "1768467602000"),
	}}
	return []clockEvent{
		{eventFile{Name: "04-timer-queue.json", Body: indent(t, batch)}, "batchItemFailures:"},
		{eventFile{Name: "05-sweep.json", Body: indent(t, awsrt.SweepEvent{Action: awsrt.SweepAction})}, "sweep"},
	}
}

// clockAnswer writes the clock function's answer as events/clock's
// expected.json does: "ok" for null (an instant), "batchItemFailures:"
// followed by the failing messageIds, comma-separated, for an SQS batch,
// "sweep" for a sweep's counts.
func clockAnswer(out any) string {
	switch v := out.(type) {
	case nil:
		return "ok"
	case events.SQSEventResponse:
		var ids []string
		for _, f := range v.BatchItemFailures {
			ids = append(ids, f.ItemIdentifier)
		}
		return "batchItemFailures:" + strings.Join(ids, ",")
	case awsrt.SweepResult:
		return "sweep"
	}
	return fmt.Sprintf("unexpected %T", out)
}

// The ARNs the functions are configured with (the emulator checks none).
const (
	ClockFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:clockwork-clock"
	SchedulerRoleARN = "arn:aws:iam::000000000000:role/clockwork-scheduler"
	SchedulerDLQARN  = "arn:aws:sqs:us-east-1:000000000000:clockwork-scheduler-dlq"
)

func indent(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func failures(resp events.DynamoDBEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// ---- API Gateway HTTP API (payload format 2.0) requests ----

// ---- DynamoDB stream records ----

// poisoned returns a record that follows good in its shard (the next
// sequence number) and whose new image cannot be decoded: its data
// attribute is a string, where the layout stores binary.
func poisoned(t testing.TB, good events.DynamoDBEventRecord) events.DynamoDBEventRecord {
	t.Helper()
	b, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	var p events.DynamoDBEventRecord
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p.EventID = good.EventID + "-poison"
	p.Change.SequenceNumber = incDecimal(good.Change.SequenceNumber)
	p.Change.NewImage["data"] = events.NewStringAttribute(`{"state": "not what the codec stores"}`)
	if _, err := dynamo.ChangeFromStreamRecord(p); err == nil {
		t.Fatal("the poison record decodes")
	}
	return p
}

// incDecimal adds one to a decimal string.
func incDecimal(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

// ---- API Gateway HTTP API Lambda authorizer requests (payload 2.0) ----

// v2AuthorizerRequest is the payload 2.0 authorizer request, field for
// field as API Gateway sends it for a REQUEST authorizer whose identity
// source is the Authorization header.
type v2AuthorizerRequest struct {
	Version        string            `json:"version"`
	Type           string            `json:"type"`
	RouteArn       string            `json:"routeArn"`
	IdentitySource []string          `json:"identitySource"`
	RouteKey       string            `json:"routeKey"`
	RawPath        string            `json:"rawPath"`
	RawQueryString string            `json:"rawQueryString"`
	Headers        map[string]string `json:"headers"`
	PathParameters map[string]string `json:"pathParameters,omitempty"`
	RequestContext v2Context         `json:"requestContext"`
}

// authorizerEvents are the authorizer's sample requests (the sample token,
// an unknown one, another scheme) and whether each is authorised, checked
// in process against the authorizer.
func authorizerEvents(t testing.TB) ([]eventFile, map[string]bool) {
	t.Helper()
	cases := []struct {
		file, header string
		ok           bool
	}{
		{"01-sample-token.json", "Bearer " + SampleToken, true},
		{"02-unknown-token.json", "Bearer clockwork-revoked-token-0002", false},
		{"03-basic-scheme.json", "Basic Y2xvY2t3b3JrOnNhbXBsZQ==", false},
	}
	authz := sampleAuthorizer()
	var files []eventFile
	want := map[string]bool{}
	for i, c := range cases {
		at := requestTime.Add(time.Duration(i) * time.Second)
		path := "/v1/agents/" + AgentID + "/expectations/" + Scheduled
		route := "GET /v1/agents/{agentId}/expectations/{expectationId}"
		req := v2AuthorizerRequest{
			Version: "2.0", Type: "REQUEST",
			RouteArn:       "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/$default/GET" + path,
			IdentitySource: []string{c.header}, RouteKey: route, RawPath: path,
			Headers:        map[string]string{"authorization": c.header, "accept": "application/json", "host": sampleDomain, "user-agent": sampleUserAgent},
			PathParameters: map[string]string{"agentId": AgentID, "expectationId": Scheduled},
			RequestContext: sampleContext("GET", "/v1/agents/{agentId}/expectations/{expectationId}", path, "sample-authorizer-"+strings.TrimSuffix(c.file, ".json"), at, nil),
		}
		body := indent(t, req)
		var ev events.APIGatewayV2CustomAuthorizerV2Request
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatal(err)
		}
		res, err := authz.Handle(context.Background(), ev)
		if err != nil || res.IsAuthorized != c.ok {
			t.Fatalf("%s: %+v, %v; want isAuthorized %v", c.file, res, err, c.ok)
		}
		files = append(files, eventFile{Name: c.file, Body: body})
		want[c.file] = c.ok
	}
	return files, want
}
