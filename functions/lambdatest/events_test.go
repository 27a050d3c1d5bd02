package lambdatest

import (
	"bytes"
	"context"
	"crypto/sha256"
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

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/authorizer"
	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/dynamo"
)

// The identities the sample events use.
const (
	// SampleToken is the bearer token every api event carries (except the
	// unauthorized one). It is a published test value, not a secret: the
	// functions under test only know its SHA-256 (TOKENS_JSON tokenSha256).
	SampleToken = "clockwork-sample-token-0001"
	// AgentID is the agent the events register and act for.
	AgentID = "agent-1"
	// AnticipationID and PlanID are those of the seed ANTICIPATE.
	AnticipationID = "ant-20260624-001"
	PlanID         = "plan-abc123"
	// Lapsing is the expectation whose instants are the clock events: due
	// in the past, so the first of them lapses it (overdue) whenever the
	// events are replayed; the stream's lapse event is its lapse.
	Lapsing = "inv-43-paid"
	// Scheduled is the expectation, due far ahead, whose creation is the
	// stream's first event: processing it creates three schedules.
	Scheduled = "inv-42-paid"
)

// TokensJSON is the TOKENS_JSON the functions run with: SampleToken by its
// SHA-256, every scope, every agent.
func TokensJSON() string {
	sum := sha256.Sum256([]byte(SampleToken))
	return `{"tokens":[{"tokenSha256":"` + hex.EncodeToString(sum[:]) + `","principal":"sample-events",` +
		`"scopes":["agents:write","expectations:write","facts:write","anticipations:write","events:write","grades:write","read"],"agents":["*"]}]}`
}

// The functions and their event folders.
var functionNames = []string{"api", "authorizer", "clock", "grader", "ingest", "stream"}

// sampleAuthorizer is the authorizer with TOKENS_JSON.
func sampleAuthorizer() *authorizer.Authorizer {
	return &authorizer.Authorizer{
		Load: func(context.Context) ([]byte, error) { return []byte(TokensJSON()), nil },
		Log:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
}

// SampleAuthorizerContext is the context the authorizer returns for
// SampleToken: what API Gateway passes to the API function with every api
// event but the unauthorised one.
func SampleAuthorizerContext(t testing.TB) map[string]any {
	t.Helper()
	res, err := sampleAuthorizer().Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{IdentitySource: []string{"Bearer " + SampleToken}})
	if err != nil || !res.IsAuthorized {
		t.Fatalf("the sample token is refused: %+v, %v", res, err)
	}
	return res.Context
}

// moduleRoot returns the repository root (this package is functions/lambdatest).
func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// eventFile is one sample event.
type eventFile struct {
	Name string
	Body []byte
}

// loadEvents returns the events of one function's folder in name order
// (every *.json but expected.json).
func loadEvents(t testing.TB, function string) []eventFile {
	t.Helper()
	dir := filepath.Join(moduleRoot(t), "events", function)
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []eventFile
	for _, p := range names {
		if filepath.Base(p) == "expected.json" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, eventFile{Name: filepath.Base(p), Body: b})
	}
	if len(out) == 0 {
		t.Fatalf("no events in %s", dir)
	}
	return out
}

// loadExpected reads a folder's expected.json, which must name exactly the
// folder's events.
func loadExpected[T any](t testing.TB, function string, evs []eventFile) map[string]T {
	t.Helper()
	p := filepath.Join(moduleRoot(t), "events", function, "expected.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]T
	if err := strictJSON(b, &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
		if _, ok := m[e.Name]; !ok {
			t.Errorf("%s has no entry for %s", p, e.Name)
		}
	}
	for name := range m {
		if !slices.Contains(names, name) {
			t.Errorf("%s names %s, which is not an event of events/%s", p, name, function)
		}
	}
	return m
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestEventFiles checks the sample events without building or running
// anything: the API requests are well-formed payload v2 events with the
// sample token (the ANTICIPATE correctly signed), the clock events are
// instants of every kind, and the stream records decode with the adapter's
// codec, except the poison records expected.json names.
func TestEventFiles(t *testing.T) {
	t.Run("api", func(t *testing.T) {
		evs := loadEvents(t, "api")
		want := loadExpected[int](t, "api", evs)
		for _, e := range evs {
			var req events.APIGatewayV2HTTPRequest
			if err := strictJSON(e.Body, &req); err != nil {
				t.Errorf("%s: not an API Gateway payload v2 request: %v", e.Name, err)
				continue
			}
			method, route, _ := strings.Cut(req.RouteKey, " ")
			switch {
			case req.Version != "2.0":
				t.Errorf("%s: version %q, want 2.0", e.Name, req.Version)
			case req.RequestContext.RouteKey != req.RouteKey:
				t.Errorf("%s: requestContext.routeKey %q differs from routeKey %q", e.Name, req.RequestContext.RouteKey, req.RouteKey)
			case method != req.RequestContext.HTTP.Method:
				t.Errorf("%s: routeKey %q but method %s", e.Name, req.RouteKey, req.RequestContext.HTTP.Method)
			case req.RawPath != req.RequestContext.HTTP.Path:
				t.Errorf("%s: rawPath %q differs from requestContext.http.path %q", e.Name, req.RawPath, req.RequestContext.HTTP.Path)
			case !routeMatches(route, req.RawPath, req.PathParameters):
				t.Errorf("%s: path %s does not match route %s with pathParameters %v", e.Name, req.RawPath, route, req.PathParameters)
			case req.IsBase64Encoded:
				t.Errorf("%s: isBase64Encoded", e.Name)
			}
			authz := req.Headers["authorization"]
			// Public routes; a browser asks for the console's files without a token.
			public := req.RouteKey == "GET /healthz" || strings.HasPrefix(req.RouteKey, "GET /console")
			if want[e.Name] == 401 {
				if authz != "" || req.RequestContext.Authorizer != nil {
					t.Errorf("%s: expected 401 but carries authorization or an authorizer context", e.Name)
				}
			} else if authz != "Bearer "+SampleToken && !(public && authz == "") {
				t.Errorf("%s: authorization %q, want Bearer %s", e.Name, authz, SampleToken)
			} else if a := req.RequestContext.Authorizer; public {
				if a != nil {
					t.Errorf("%s: a public route carries an authorizer context", e.Name)
				}
			} else if a == nil || fmt.Sprint(a.Lambda) != fmt.Sprint(SampleAuthorizerContext(t)) {
				t.Errorf("%s: authorizer context %+v, want what the authorizer returns for the sample token", e.Name, a)
			}
			if req.Body != "" && !json.Valid([]byte(req.Body)) {
				t.Errorf("%s: body is not JSON", e.Name)
			}
			if req.RouteKey == "POST /v1/anticipations" {
				if _, err := anticipate.Validate([]byte(req.Body)); err != nil {
					t.Errorf("%s: the ANTICIPATE does not validate (d_dna_signature?): %v", e.Name, err)
				}
			}
		}
	})
	t.Run("ingest", func(t *testing.T) {
		evs := loadEvents(t, "ingest")
		loadExpected[int](t, "ingest", evs)
		for _, e := range evs {
			var req events.APIGatewayV2HTTPRequest
			if err := strictJSON(e.Body, &req); err != nil || req.RouteKey != "POST /v1/traces" || req.RawPath != "/v1/traces" ||
				req.Headers["authorization"] != "Bearer "+SampleToken || req.RequestContext.Authorizer == nil || !json.Valid([]byte(req.Body)) {
				t.Errorf("%s: not an OTLP export through API Gateway with the sample token: %v", e.Name, err)
			}
		}
	})
	t.Run("authorizer", func(t *testing.T) {
		evs := loadEvents(t, "authorizer")
		want := loadExpected[bool](t, "authorizer", evs)
		authorised := 0
		for _, e := range evs {
			var req events.APIGatewayV2CustomAuthorizerV2Request
			if err := strictJSON(e.Body, &req); err != nil {
				t.Errorf("%s: not an authorizer payload 2.0 request: %v", e.Name, err)
				continue
			}
			if req.Version != "2.0" || req.Type != "REQUEST" || len(req.IdentitySource) != 1 || req.IdentitySource[0] != req.Headers["authorization"] {
				t.Errorf("%s: version %q, type %q, identitySource %v (want the authorization header)", e.Name, req.Version, req.Type, req.IdentitySource)
			}
			if want[e.Name] {
				authorised++
			}
		}
		if authorised == 0 || authorised == len(evs) {
			t.Errorf("the authorizer events should hold both answers: %v", want)
		}
	})
	t.Run("clock", func(t *testing.T) {
		evs := loadEvents(t, "clock")
		want := loadExpected[string](t, "clock", evs)
		var kinds []expect.InstantKind
		batches, sweeps := 0, 0
		for _, e := range evs {
			switch w := want[e.Name]; {
			case w == "ok":
				var in expect.Instant
				if err := strictJSON(e.Body, &in); err != nil {
					t.Errorf("%s: not an instant: %v", e.Name, err)
					continue
				}
				if in.AgentID != AgentID || in.ExpectationID != Lapsing || in.At.IsZero() {
					t.Errorf("%s: instant %+v, want one of %s/%s", e.Name, in, AgentID, Lapsing)
				}
				kinds = append(kinds, in.Kind)
			case w == "sweep":
				var ev awsrt.SweepEvent
				if err := strictJSON(e.Body, &ev); err != nil || ev.Action != awsrt.SweepAction {
					t.Errorf("%s: not a sweep event (%v)", e.Name, err)
				}
				sweeps++
			case strings.HasPrefix(w, "batchItemFailures:"):
				var ev events.SQSEvent
				if err := strictJSON(e.Body, &ev); err != nil || len(ev.Records) == 0 {
					t.Errorf("%s: not an SQS event (%v)", e.Name, err)
					continue
				}
				ids := map[string]bool{}
				for _, r := range ev.Records {
					ids[r.MessageId] = true
					if r.EventSource != "aws:sqs" || r.ReceiptHandle == "" || r.Md5OfBody == "" || r.Attributes["ApproximateReceiveCount"] == "" {
						t.Errorf("%s: record %s lacks what Lambda's SQS event carries", e.Name, r.MessageId)
					}
				}
				for _, id := range strings.Split(strings.TrimPrefix(w, "batchItemFailures:"), ",") {
					if id != "" && !ids[id] {
						t.Errorf("%s: expected failure %s is not a messageId of the batch", e.Name, id)
					}
				}
				batches++
			default:
				t.Errorf("expected.json: %s: %q, want \"ok\", \"sweep\" or \"batchItemFailures:<ids>\"", e.Name, w)
			}
		}
		for _, k := range []expect.InstantKind{expect.InstantDue, expect.InstantGrace, expect.InstantHorizon} {
			if !slices.Contains(kinds, k) {
				t.Errorf("no clock event of kind %s", k)
			}
		}
		if batches == 0 || sweeps == 0 {
			t.Errorf("events/clock has %d timer-queue batches and %d sweeps, want at least one of each", batches, sweeps)
		}
	})
	t.Run("grader", func(t *testing.T) {
		evs := loadEvents(t, "grader")
		want := loadExpected[string](t, "grader", evs)
		jobs := 0
		for _, e := range evs {
			var ev events.SQSEvent
			if err := strictJSON(e.Body, &ev); err != nil || len(ev.Records) == 0 {
				t.Errorf("%s: not an SQS event (%v)", e.Name, err)
				continue
			}
			if !strings.HasPrefix(want[e.Name], "batchItemFailures:") {
				t.Errorf("expected.json: %s: %q, want \"batchItemFailures:<ids>\"", e.Name, want[e.Name])
			}
			for _, r := range ev.Records {
				if r.EventSource != "aws:sqs" || r.ReceiptHandle == "" || r.Md5OfBody == "" || r.Attributes["ApproximateReceiveCount"] == "" {
					t.Errorf("%s: record %s lacks what Lambda's SQS event carries", e.Name, r.MessageId)
				}
				if _, err := evaluation.UnmarshalGradeJob(r.Body); err == nil {
					jobs++
				}
			}
		}
		if jobs == 0 {
			t.Error("events/grader has no grading job")
		}
	})
	t.Run("stream", func(t *testing.T) {
		evs := loadEvents(t, "stream")
		want := loadExpected[[]string](t, "stream", evs)
		seen := map[string]string{}
		for _, e := range evs {
			var ev events.DynamoDBEvent
			if err := strictJSON(e.Body, &ev); err != nil {
				t.Errorf("%s: not a DynamoDB stream event: %v", e.Name, err)
				continue
			}
			if len(ev.Records) == 0 {
				t.Errorf("%s: no records", e.Name)
			}
			var failing []string
			for i, rec := range ev.Records {
				seq := rec.Change.SequenceNumber
				if other, ok := seen[seq]; ok {
					t.Errorf("%s record %d: SequenceNumber %s also in %s", e.Name, i, seq, other)
				}
				seen[seq] = e.Name
				if rec.EventSource != "aws:dynamodb" || rec.Change.StreamViewType != "NEW_AND_OLD_IMAGES" {
					t.Errorf("%s record %d: eventSource %q, StreamViewType %q", e.Name, i, rec.EventSource, rec.Change.StreamViewType)
				}
				if _, err := dynamo.ChangeFromStreamRecord(rec); err != nil {
					failing = append(failing, seq)
					t.Logf("%s record %d (%s) does not decode: %v", e.Name, i, seq, err)
				}
			}
			// HandleStream stops at the first failing record, so only the
			// first undecodable one can be reported.
			if len(failing) > 1 {
				failing = failing[:1]
			}
			if w := want[e.Name]; !slices.Equal(failing, w) && !(len(failing) == 0 && len(w) == 0) {
				t.Errorf("%s: undecodable records %v, expected.json says %v", e.Name, failing, w)
			}
		}
	})
}

// routeMatches reports whether path is route with its {params} replaced by
// params.
func routeMatches(route, path string, params map[string]string) bool {
	rs, ps := strings.Split(route, "/"), strings.Split(path, "/")
	if len(rs) != len(ps) {
		return false
	}
	n := 0
	for i, r := range rs {
		if name, ok := strings.CutPrefix(r, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if params[name] != ps[i] {
				return false
			}
			n++
		} else if r != ps[i] {
			return false
		}
	}
	return n == len(params)
}
