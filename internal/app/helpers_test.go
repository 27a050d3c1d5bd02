package app

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/store"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/awsrt/awsjudge"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/mcpapi"
	"github.com/agentclock/clockwork/internal/otlpin"
	"github.com/agentclock/clockwork/internal/outbox"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

const (
	adminToken  = "admin-token"
	readerToken = "reader-token"
	otherToken  = "other-agent-token"
	tenantA     = "tenant-a-token"
	tenantB     = "tenant-b-token"
	factsToken  = "facts-token"
	// Reviewers (grades:write and read for every agent).
	aliceToken = "alice-token"
	bobToken   = "bob-token"
	carolToken = "carol-token"
)

type testEnv struct {
	t   *testing.T
	dir string
	cfg Config
	app *App
	srv *httptest.Server
	// public makes the server know its own URL as its public URL
	// (-public-url, PUBLIC_URL): where watched tasks' agents push.
	public bool
	// publicLn is the listener the server will serve, opened before the
	// runtime starts so that its address can be the public URL.
	publicLn net.Listener

	// AWS mode.
	aws        bool
	table      string
	timerQueue string
	// gradingQueue is the grading queue of the AWS mode; while
	// loseGradingJobs is set its poller loses every message
	// (LocalOptions.LoseGradingJobs).
	gradingQueue    string
	loseGradingJobs atomic.Bool
	// lostGradingJobs counts the batches of grading jobs lost so.
	lostGradingJobs atomic.Int64
	// loseTimerMessages: while set the timer queue's poller loses every
	// message (AWS mode).
	loseTimerMessages atomic.Bool
	// discardStream, when set, makes the stream poller discard the
	// records it returns true for (AWS mode), as Lambda does after a
	// record's retries or maximum age.
	discardStream func(store.Change) bool
	rt            *awsrt.Runtime
	local         *awsrt.Local
	kmsKey        string // seals outbound credentials (moto's KMS)
}

// The AWS mode runs with Scheduler's one-minute precision scaled down to
// awsTestPrecision, and its emulated Scheduler fires every schedule early
// by up to that less a second, late by up to that, a fifth of them twice
// and one in twenty never (awsrt.FaultsFor). An instant at least three
// periods (6 s) ahead gets a schedule, a nearer one goes straight on the
// timer queue, so the scenarios go through both. The sweep takes up what
// is awsTestSweepAfter past due.
const (
	awsTestPrecision  = 2 * time.Second
	awsTestSweepAfter = 2 * time.Second
	// awsTestGradingRepairAfter is how late a grading job is before the
	// sweep puts it back on the grading queue.
	awsTestGradingRepairAfter = 3 * time.Second
	// awsTestEffectsRepairAfter is how old a change's effect marker is
	// before the sweep redoes its effects (deployed: 5 minutes).
	awsTestEffectsRepairAfter = 3 * time.Second
)

// backendKind selects the backend startEnv starts ("embedded" or "aws").
var backendKind = "embedded"

var emulatorEndpoint string

// awsStreamFaults, when set, are the stream delivery faults of the AWS
// mode's poller (TestAWSMode sets them).
var awsStreamFaults *awsrt.StreamFaults

var _, testSigningKey, _ = ed25519.GenerateKey(nil)

// startEmulator starts (once per test binary) the moto server that plays
// DynamoDB, DynamoDB Streams and EventBridge Scheduler. With CI=true a
// missing emulator fails the test.
func startEmulator(t *testing.T) {
	t.Helper()
	emulatorEndpoint = dynamotest.Start(t)
}

func tokensJSON(t *testing.T) string {
	b, _ := json.Marshal(auth.File{Tokens: testTokens})
	return string(b)
}

var testTokens = []auth.TokenSpec{
	{Token: adminToken, Principal: "admin", Scopes: auth.AllScopes, Agents: []string{"*"}},
	{Token: readerToken, Principal: "reader", Scopes: []auth.Scope{auth.Read}, Agents: []string{"*"}},
	{Token: otherToken, Principal: "other", Scopes: auth.AllScopes, Agents: []string{"someone-else"}},
	{Token: tenantA, Principal: "tenant-a", Scopes: auth.AllScopes, Agents: []string{"agent-a"}},
	{Token: tenantB, Principal: "tenant-b", Scopes: auth.AllScopes, Agents: []string{"agent-b"}},
	{Token: factsToken, Principal: "reporter-7", Scopes: []auth.Scope{auth.FactsWrite, auth.Read}, Agents: []string{"*"}},
	{Token: aliceToken, Principal: "alice", Scopes: []auth.Scope{auth.GradesWrite, auth.Read}, Agents: []string{"*"}},
	{Token: bobToken, Principal: "bob", Scopes: []auth.Scope{auth.GradesWrite, auth.Read}, Agents: []string{"*"}},
	{Token: carolToken, Principal: "carol", Scopes: []auth.Scope{auth.GradesWrite, auth.Read}, Agents: []string{"*"}},
}

func testAuth(t *testing.T) *auth.Authenticator {
	a, err := auth.New(testTokens)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startEnv starts the runtime (backendKind's) on a fresh data directory.
func startEnv(t *testing.T, mut ...func(*Config)) *testEnv {
	t.Helper()
	e := newEnv(t, mut...)
	e.restart()
	t.Cleanup(e.stop)
	return e
}

// newEnv is startEnv without the start, for a test that sets more of the
// environment first.
func newEnv(t *testing.T, mut ...func(*Config)) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), aws: backendKind == "aws"}
	e.cfg = Config{
		DataDir:            e.dir,
		Auth:               testAuth(t),
		Log:                failureLog(t),
		AllowPrivateAgents: true,
		Outbox:             outbox.Options{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxAttempts: 4},
		// A judge's failed attempt comes back within a fraction of a
		// second, and a criterion is given up after a few.
		JudgeRetry: evaluation.JudgeRetry{Attempts: 3, Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, CallTimeout: 5 * time.Second},
		// Evaluations are not held back by the judge's rate bound.
		EvaluationJudgeRate: 10000,
	}
	if os.Getenv("CLOCKWORK_TEST_LOG") != "" {
		e.cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, m := range mut {
		m(&e.cfg)
	}
	return e
}

func (e *testEnv) restart() {
	e.t.Helper()
	if e.aws {
		e.restartAWS()
		return
	}
	e.listenPublic()
	a, err := Start(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.app = a
	e.srv = e.serve(a.Handler)
}

// listenPublic opens the listener of a public server and makes its URL
// the public URL.
func (e *testEnv) listenPublic() {
	if !e.public {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.publicLn = ln
	e.cfg.Notify.PublicURL = "http://" + ln.Addr().String()
}

// serve serves h, on the public listener when there is one.
func (e *testEnv) serve(h http.Handler) *httptest.Server {
	if e.publicLn == nil {
		return httptest.NewServer(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener, e.publicLn = e.publicLn, nil
	srv.Start()
	return srv
}

// restartAWS starts the AWS runtime on the emulator, on the same table
// and schedule group as before a stop.
func (e *testEnv) restartAWS() {
	e.t.Helper()
	if emulatorEndpoint == "" {
		e.t.Fatal("AWS mode needs the emulator: call startEmulator first")
	}
	if e.table == "" {
		var b [4]byte
		rand.Read(b[:])
		e.table = fmt.Sprintf("cw-%x", b)
	}
	log := e.cfg.Log
	attempts := e.cfg.Outbox.MaxAttempts
	// The signing key comes from SSM, as it does on AWS.
	keyParam := ""
	if !e.cfg.NoSigningKey {
		keyParam = putSigningKeyParameter(e.t, e.table)
	}
	// So is the openai judge's API key.
	judgeKeyParam := ""
	if e.cfg.JudgeAPIKey != "" {
		judgeKeyParam = putJudgeKeyParameter(e.t, e.table, e.cfg.JudgeAPIKey)
	}
	if e.timerQueue == "" {
		ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: emulatorEndpoint})
		if err != nil {
			e.t.Fatal(err)
		}
		q, err := awsrt.CreateTimerQueue(context.Background(), awsclient.NewSQSSender(ac), e.table+"-timers")
		if err != nil {
			e.t.Fatal(err)
		}
		e.timerQueue = q.URL
		g, err := awsrt.CreateGradingQueue(context.Background(), awsclient.NewSQSSender(ac), e.table+"-grading")
		if err != nil {
			e.t.Fatal(err)
		}
		e.gradingQueue = g.URL
	}
	verifySESSender(e.t)
	// Each function's main starts the runtime (awsrt.New): what it reads
	// then, every one of them reads (awsops.Init).
	e.listenPublic()
	rt, err := awsrt.New(awsops.WithFunction(context.Background(), awsops.Init), awsrt.Config{
		PublicURL:     e.cfg.Notify.PublicURL,
		TimerQueueURL: e.timerQueue, GradingQueueURL: e.gradingQueue, JudgeRetry: e.cfg.JudgeRetry, EvaluationJudgeRate: e.cfg.EvaluationJudgeRate, GradingRepairAfter: awsTestGradingRepairAfter,
		SchedulerPrecision: awsTestPrecision, SweepAfter: awsTestSweepAfter, EffectsRepairAfter: awsTestEffectsRepairAfter,
		Table: e.table, ScheduleGroup: e.table, ClockFunctionARN: "arn:aws:lambda:us-east-1:000000000000:function:clock",
		SchedulerRoleARN: "arn:aws:iam::000000000000:role/scheduler", SchedulerDLQARN: "arn:aws:sqs:us-east-1:000000000000:clock-dlq",
		TokensJSON: tokensJSON(e.t), AllowPrivateAgents: e.cfg.AllowPrivateAgents, MaxLineage: e.cfg.Rules.MaxLineage, DeliveryAttempts: attempts,
		RetainExpectations: e.cfg.Rules.Retain, RetainEvidence: e.cfg.RetainEvidence,
		JudgeURL: e.cfg.JudgeURL, Endpoint: emulatorEndpoint, Stage: "test", Log: log,
		JudgeKind: e.cfg.JudgeKind, JudgeModel: e.cfg.JudgeModel, JudgeAPIKeyParameter: judgeKeyParam, JudgeToken: e.cfg.JudgeToken, Judges: awsjudge.New,
		DeliveryTimeout: e.cfg.Outbox.AttemptTimeout, SigningKeyParameter: keyParam,
		CredentialsKeyID: e.credentialsKey(), AgentHTTPClient: e.cfg.AgentHTTPClient,
		AWSHTTPClient: recordingAWSClient(),
		Metrics:       e.cfg.Metrics,
		SESFrom:       sesSender, EventBridgeAlerts: true, Notify: e.cfg.Notify,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	faults := awsStreamFaults
	if e.discardStream != nil {
		f := awsrt.StreamFaults{}
		if faults != nil {
			f = *faults
		}
		f.Discard = e.discardStream
		faults = &f
	}
	local, err := awsrt.StartLocal(rt, awsrt.LocalOptions{
		PollInterval: 50 * time.Millisecond, PauseFeed: e.cfg.PauseFeed, Create: true, StreamFaults: faults,
		SchedulerFaults: awsrt.FaultsFor(awsTestPrecision), SweepInterval: awsTestSweepAfter / 4, LoseGradingJobs: func() bool {
			if e.loseGradingJobs.Load() {
				e.lostGradingJobs.Add(1)
				return true
			}
			return false
		},
		LoseTimerMessages: e.loseTimerMessages.Load,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.rt, e.local = rt, local
	mcpapi.Mount(rt.API()) // as functions/api and the local AWS mode do
	// As deployed: API Gateway sends POST /v1/traces to the ingest
	// function (its own handler), everything else to the api function.
	traces := rt.Traces()
	otlpin.Mount(traces, otlpin.Config{})
	mux := http.NewServeMux()
	mux.Handle("/", awsops.Tag("api", rt.HTTP()))
	mux.Handle("POST /v1/traces", awsops.Tag("ingest", traces))
	e.srv = e.serve(mux)
}

func (e *testEnv) stop() {
	if e.local != nil && awsStreamFaults != nil {
		if c := e.local.StreamFaultCounts(); c != (awsrt.StreamFaultCounts{}) {
			e.t.Logf("stream faults injected: %+v", c)
		}
	}
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
	if e.app != nil {
		_ = e.app.Close()
		e.app = nil
	}
	if e.local != nil {
		e.local.Close()
		e.local, e.rt = nil, nil
	}
}

// verify runs VERIFY for a plan directly (as a replayed feed record would).
func (e *testEnv) verify(agent, plan string) error {
	if e.aws {
		// The stream function runs VERIFY (awsops attributes its calls).
		return e.rt.Eval.Verify(awsops.WithFunction(context.Background(), "stream"), agent, plan)
	}
	return e.app.Eval.Verify(context.Background(), agent, plan)
}

type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// call sends a request with the admin token unless another is given
// ("" sends none).
func (e *testEnv) call(method, path string, body any, token ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	tok := adminToken
	if len(token) > 0 {
		tok = token[0]
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

func (e *testEnv) must(status int, r resp) resp {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

func (e *testEnv) record(agent, id string) *expect.Record {
	e.t.Helper()
	var r expect.Record
	e.must(200, e.call("GET", "/v1/agents/"+agent+"/expectations/"+id, nil)).json(e.t, &r)
	return &r
}

// waitRecord polls until cond holds for the record (generous deadline; this
// waits for asynchronous work, it does not assert speed).
func (e *testEnv) waitRecord(agent, id string, cond func(*expect.Record) bool) *expect.Record {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.record(agent, id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("record %s never reached the condition; last: %+v", id, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listing polls a listing until cond holds (generous deadline) and returns
// its records. Listings read global secondary indexes, which on DynamoDB
// (and in the AWS mode, whose emulator makes them lag) show a commit only a
// moment later; the caller then checks exactly what is listed.
func (e *testEnv) listing(path string, cond func([]expect.Record) bool) []expect.Record {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var l struct{ Records []expect.Record }
		e.must(200, e.call("GET", path, nil)).json(e.t, &l)
		if cond(l.Records) || time.Now().After(deadline) {
			return l.Records
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func problem(t *testing.T, r resp) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q for %d: %s", ct, r.status, r.body)
	}
	var p map[string]any
	r.json(t, &p)
	return p
}

func hasErrorPath(t *testing.T, r resp, path string) {
	t.Helper()
	p := problem(t, r)
	list, _ := p["errors"].([]any)
	for _, x := range list {
		if m, _ := x.(map[string]any); m["path"] == path {
			return
		}
	}
	t.Fatalf("no error on %q in %s", path, r.body)
}

func ts(d time.Duration) string { return expect.FormatTime(time.Now().Add(d)) }

func (e *testEnv) request(method, path string, body []byte) *http.Request {
	req, _ := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func (e *testEnv) do(req *http.Request) resp {
	e.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// credentialsKey creates (once per environment) the KMS key that seals
// outbound credentials in the AWS mode, as the stack does.
func (e *testEnv) credentialsKey() string {
	e.t.Helper()
	if e.kmsKey == "" {
		out, err := kms.NewFromConfig(dynamotest.Config(emulatorEndpoint)).CreateKey(context.Background(), &kms.CreateKeyInput{})
		if err != nil {
			e.t.Fatalf("KMS CreateKey on the emulator: %v", err)
		}
		e.kmsKey = *out.KeyMetadata.KeyId
	}
	return e.kmsKey
}
