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
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/anticipate"
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

// apiEvent is one request of the sample session and its expected status.
type apiEvent struct {
	file    string
	status  int
	method  string
	route   string // as declared on the HTTP API, e.g. /v1/agents/{agentId}
	params  map[string]string
	query   map[string]string // in this order of keys: sorted
	body    any               // encoded as compact JSON; a []byte is sent as is
	noAuth  bool
	public  bool // deployed without the authorizer: no authorizer context
	headers map[string]string
}

// The payload v2 shape, field for field as API Gateway sends it (the
// events package's struct would also emit an empty authentication block).
type v2Request struct {
	Version               string            `json:"version"`
	RouteKey              string            `json:"routeKey"`
	RawPath               string            `json:"rawPath"`
	RawQueryString        string            `json:"rawQueryString"`
	Headers               map[string]string `json:"headers"`
	QueryStringParameters map[string]string `json:"queryStringParameters,omitempty"`
	PathParameters        map[string]string `json:"pathParameters,omitempty"`
	RequestContext        v2Context         `json:"requestContext"`
	Body                  string            `json:"body,omitempty"`
	IsBase64Encoded       bool              `json:"isBase64Encoded"`
}

type v2Context struct {
	AccountID    string        `json:"accountId"`
	APIID        string        `json:"apiId"`
	Authorizer   *v2Authorizer `json:"authorizer,omitempty"`
	DomainName   string        `json:"domainName"`
	DomainPrefix string        `json:"domainPrefix"`
	HTTP         v2HTTP        `json:"http"`
	RequestID    string        `json:"requestId"`
	RouteKey     string        `json:"routeKey"`
	Stage        string        `json:"stage"`
	Time         string        `json:"time"`
	TimeEpoch    int64         `json:"timeEpoch"`
}

// v2Authorizer is what API Gateway passes on from a Lambda authorizer
// with simple responses: its context, under "lambda".
type v2Authorizer struct {
	Lambda map[string]any `json:"lambda"`
}

type v2HTTP struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	Protocol  string `json:"protocol"`
	SourceIP  string `json:"sourceIp"`
	UserAgent string `json:"userAgent"`
}

// The API the sample requests claim to reach, and their client.
const (
	sampleDomain    = "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
	sampleUserAgent = "curl/8.5.0"
)

// sampleContext is the requestContext API Gateway sends with a sample
// request (to the API function, with the authorizer's context, or to the
// authorizer).
func sampleContext(method, route, path, requestID string, at time.Time, authorizer *v2Authorizer) v2Context {
	return v2Context{
		AccountID: "123456789012", APIID: "a1b2c3d4e5", Authorizer: authorizer, DomainName: sampleDomain, DomainPrefix: "a1b2c3d4e5",
		HTTP:      v2HTTP{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.10", UserAgent: sampleUserAgent},
		RequestID: requestID, RouteKey: method + " " + route,
		Stage: "$default", Time: at.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: at.UnixMilli(),
	}
}

// requestTime is the (fixed) time the sample requests claim to be sent.
var requestTime = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func (e apiEvent) encode(t testing.TB, seq int) []byte {
	t.Helper()
	path := e.route
	for k, v := range e.params {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	var rawQuery []string
	keys := make([]string, 0, len(e.query))
	for k := range e.query {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rawQuery = append(rawQuery, k+"="+e.query[k])
	}
	headers := map[string]string{
		"accept":            "application/json",
		"host":              sampleDomain,
		"user-agent":        sampleUserAgent,
		"x-amzn-trace-id":   "Root=1-6943f2a0-0123456789abcdef01234567",
		"x-forwarded-for":   "203.0.113.10",
		"x-forwarded-port":  "443",
		"x-forwarded-proto": "https",
	}
	var authorizerContext *v2Authorizer
	if !e.noAuth {
		headers["authorization"] = "Bearer " + SampleToken
		if !e.public {
			authorizerContext = &v2Authorizer{Lambda: SampleAuthorizerContext(t)}
		}
	}
	var body string
	switch b := e.body.(type) {
	case nil:
	case []byte:
		body = string(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = string(raw)
	}
	if body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = fmt.Sprint(len(body))
	}
	for k, v := range e.headers {
		headers[k] = v
	}
	at := requestTime.Add(time.Duration(seq) * time.Second)
	req := v2Request{
		Version: "2.0", RouteKey: e.method + " " + e.route, RawPath: path, RawQueryString: strings.Join(rawQuery, "&"),
		Headers: headers, QueryStringParameters: e.query, PathParameters: e.params,
		RequestContext: sampleContext(e.method, e.route, path, "sample-"+strings.TrimSuffix(e.file, ".json"), at, authorizerContext),
		Body:           body,
	}
	return indent(t, req)
}

// apiEvents is the sample session: register the agent, raise, read and
// list expectations, report facts, withdraw, report over A2A, declare the
// seed ANTICIPATE and run its plan, then two refused requests.
func apiEvents(t testing.TB) []apiEvent {
	t.Helper()
	agent := map[string]string{"agentId": AgentID}
	exp := func(id, invoice, due, grace, horizon string) map[string]any {
		m := map[string]any{
			"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": invoice},
			"expects": "invoice " + invoice + " is paid", "satisfiedBy": map[string]any{"factKey": "invoice." + invoice + ".paid"},
			"dueAt": due, "basis": "contract",
		}
		if grace != "" {
			m["grace"] = grace
		}
		if horizon != "" {
			m["horizon"] = horizon
		}
		return m
	}
	event := func(id, typ, ts string, fields ...any) map[string]any {
		// As an RFC-032 emitter sends it: message_type, protocol_version,
		// the context fields, and a trace id the server keeps unread.
		m := map[string]any{"protocol_version": "4.1", "message_type": typ, "event_id": id, "plan_id": PlanID,
			"agent_id": "agent-gandalf-spell-executor-001", "session_id": "ses-xyz789", "timestamp": ts,
			"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fields[i].(string)] = fields[i+1]
		}
		return m
	}
	obs := func(call string, value any, args ...any) map[string]any {
		return map[string]any{"call": call, "args": args, "value": value}
	}
	plan := map[string]string{"planId": PlanID}
	return []apiEvent{
		{file: "01-healthz.json", status: 200, method: "GET", route: "/healthz", public: true},
		{file: "02-put-agent-card.json", status: 200, method: "PUT", route: "/v1/agents/{agentId}", params: agent, body: agentCard()},
		{file: "03-raise-expectations.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/expectations", params: agent,
			body: map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{
				exp(Scheduled, "42", "2036-12-01T09:00:00Z", "PT2H", "2036-12-05T09:00:00Z"),
				exp(Lapsing, "43", "2026-01-15T09:00:00Z", "PT2H", "2026-01-20T09:00:00Z"),
				exp("inv-44-paid", "44", "2036-12-01T09:00:00Z", "P1D", ""),
				exp("inv-45-paid", "45", "2036-12-01T09:00:00Z", "", ""),
				exp("inv-46-paid", "46", "2036-12-01T09:00:00Z", "PT2H", ""),
			}}},
		{file: "04-get-expectation.json", status: 200, method: "GET", route: "/v1/agents/{agentId}/expectations/{expectationId}",
			params: map[string]string{"agentId": AgentID, "expectationId": Scheduled}},
		{file: "05-list-expectations.json", status: 200, method: "GET", route: "/v1/agents/{agentId}/expectations", params: agent,
			query: map[string]string{"state": "open", "limit": "50"}},
		{file: "06-report-facts.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/facts", params: agent,
			body: map[string]any{"facts": []any{map[string]any{"factKey": "invoice.44.paid", "observedAt": "2026-11-01T08:12:00Z"}}}},
		{file: "07-withdraw.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/withdrawals", params: agent,
			body: map[string]any{"withdraw": []string{"inv-45-paid"}, "reason": "invoice 45 was cancelled"}},
		{file: "08-a2a-status-update.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/a2a", params: agent,
			headers: map[string]string{"a2a-extensions": expect.URI},
			body: map[string]any{"statusUpdate": map[string]any{
				"taskId": "task-1", "contextId": "ctx-1",
				"status": map[string]any{
					"state": "TASK_STATE_WORKING", "timestamp": "2026-11-02T08:05:00Z",
					"message": map[string]any{
						"messageId": "msg-status-1", "role": "ROLE_AGENT", "taskId": "task-1", "contextId": "ctx-1",
						"parts":    []any{map[string]any{"text": "Invoice 46 was paid."}},
						"metadata": map[string]any{expect.URI: map[string]any{"facts": []any{map[string]any{"factKey": "invoice.46.paid", "observedAt": "2026-11-02T08:00:00Z"}}}},
					},
				},
			}}},
		{file: "09-declare-anticipation.json", status: 201, method: "POST", route: "/v1/anticipations", body: signedSeed(t)},
		{file: "10-execution-tool-request.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-001", "TOOL_REQUEST", "2026-06-24T10:00:05Z", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice", "group": "engineering"})},
		{file: "11-execution-step-complete.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-002", "STEP_COMPLETE", "2026-06-24T10:00:09Z")},
		{file: "12-execution-outcome.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-003", "OUTCOME", "2026-06-24T10:00:10Z", "variables", map[string]any{"target_username": "alice"}, "observations", []any{
				obs("user_exists", true, "alice"), obs("group_member", true, "alice", "engineering"),
				obs("policy_count", 3, "alice"), obs("group_policy_count", 3, "engineering"),
			})},
		{file: "13-execution-plan-complete.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-004", "PLAN_COMPLETE", "2026-06-24T10:00:11Z")},
		{file: "14-unauthorized.json", status: 401, method: "GET", route: "/v1/agents/{agentId}/expectations/{expectationId}", noAuth: true,
			params: map[string]string{"agentId": AgentID, "expectationId": Scheduled}},
		{file: "15-invalid-body.json", status: 400, method: "POST", route: "/v1/agents/{agentId}/expectations", params: agent,
			body: map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{
				exp("inv-99-paid", "99", "tomorrow at nine", "2 hours", ""),
			}}},
		// The MCP endpoint: a tools/call through the same gateway and authorizer.
		{file: "16-mcp-tools-call.json", status: 200, method: "POST", route: "/mcp", headers: map[string]string{"accept": "application/json, text/event-stream"},
			body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "get_expectation",
				"arguments": map[string]any{"agentId": AgentID, "expectationId": Scheduled}}}},
		// The web console: public routes, no token (the page signs in itself).
		{file: "17-console-page.json", status: 200, method: "GET", route: "/console", noAuth: true,
			headers: map[string]string{"accept": "text/html,application/xhtml+xml"}},
		{file: "18-console-asset.json", status: 200, method: "GET", route: "/console/{asset}", noAuth: true,
			params: map[string]string{"asset": "app.js"}, headers: map[string]string{"accept": "*/*"}},
	}
}

// agentCard is an A2A 1.0 card (the shape of a2atest's Card) declaring the
// extension, whose JSON-RPC URL refuses connections (port 9, discard), so
// a lapse task's delivery attempt fails fast and is recorded.
func agentCard() map[string]any {
	return map[string]any{
		"name": "Invoice agent", "description": "Chases invoices until they are paid.", "version": "1.0.0",
		"supportedInterfaces": []any{map[string]any{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{
			"uri": expect.URI, "description": "Raises expectations on invoices.",
			"params": map[string]any{"keepsTime": false, "lapseSkill": "handle-lapse", "kinds": []any{
				map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "The customer pays the invoice.", "basis": "contract"},
			}},
		}}},
		"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []any{
			map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation.", "tags": []string{"expectations"}},
			map[string]any{"id": "chase-invoice", "name": "Chase invoice", "description": "Reminds a customer of an unpaid invoice.", "tags": []string{"invoices"}},
		},
	}
}

// signedSeed is the seed ANTICIPATE with its d_dna_signature computed.
func signedSeed(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "internal", "anticipate", "testdata", "seed_anticipate.json"))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := anticipate.Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anticipate.Validate(signed); err != nil {
		t.Fatalf("signed seed does not validate: %v", err)
	}
	return signed
}

// ---- DynamoDB stream records ----

// readStream returns every record of the table's stream, in order.
func readStream(t testing.TB, rt *awsrt.Runtime, table string) []streamtypes.Record {
	t.Helper()
	ctx := context.Background()
	arn, err := dynamo.StreamARN(ctx, rt.DynamoDB, table)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := rt.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []streamtypes.Record
	for _, sh := range desc.StreamDescription.Shards {
		it, err := rt.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := rt.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Records...)
			if len(page.Records) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	slices.SortStableFunc(out, func(a, b streamtypes.Record) int {
		x, y := aws.ToString(a.Dynamodb.SequenceNumber), aws.ToString(b.Dynamodb.SequenceNumber)
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
	return out
}

// streamARN is the event source ARN the sample records carry: the stream
// of a table named clockwork.
const streamARN = "arn:aws:dynamodb:us-east-1:123456789012:table/clockwork/stream/2026-11-30T10:00:00.000"

// toEventRecord converts a DynamoDB Streams record into the record of a
// Lambda DynamoDB event.
func toEventRecord(t testing.TB, r streamtypes.Record) events.DynamoDBEventRecord {
	t.Helper()
	d := r.Dynamodb
	img := func(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]events.DynamoDBAttributeValue, len(m))
		for k, v := range m {
			out[k] = toEventAV(t, v)
		}
		return out
	}
	rec := events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: "aws:dynamodb", EventVersion: "1.1", EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			Keys: img(d.Keys), NewImage: img(d.NewImage), OldImage: img(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		},
	}
	if d.ApproximateCreationDateTime != nil {
		rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: d.ApproximateCreationDateTime.Truncate(time.Second)}
	}
	if rec.EventVersion == "" || rec.Change.StreamViewType == "" {
		t.Fatalf("stream record %+v lacks fields", r)
	}
	return rec
}

func toEventAV(t testing.TB, v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	t.Helper()
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = toEventAV(t, e)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberM:
		m := make(map[string]events.DynamoDBAttributeValue, len(v.Value))
		for k, e := range v.Value {
			m[k] = toEventAV(t, e)
		}
		return events.NewMapAttribute(m)
	}
	t.Fatalf("attribute value %T is not used by the table layout", v)
	return events.DynamoDBAttributeValue{}
}

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
