// Package awsops records the AWS operations each function performs, as IAM
// authorizes them: the action (dynamodb:PutItem, scheduler:CreateSchedule,
// iam:PassRole, ...) and the resource it acts on. The tests of the AWS mode
// record every request sent to AWS (the SDK's clients and the hand-written
// SQS and KMS calls alike) through Recorder's HTTP transport, attributed to
// the function whose handler made it (WithFunction), and the infra tests
// check that each function's role grants exactly what it used.
package awsops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

type functionKey struct{}

// WithFunction returns ctx tagged with the function (api, authorizer,
// clock, stream) whose work it carries; the AWS requests made under it are
// attributed to that function.
func WithFunction(ctx context.Context, function string) context.Context {
	return context.WithValue(ctx, functionKey{}, function)
}

// FunctionOf returns the function ctx was tagged with, or "".
func FunctionOf(ctx context.Context) string {
	f, _ := ctx.Value(functionKey{}).(string)
	return f
}

// Tag tags every request of h with function (the API function's handler).
func Tag(function string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(WithFunction(r.Context(), function)))
	})
}

// Op is one operation as IAM sees it: who (Function), what (Action, such
// as "dynamodb:GetItem") and on what (Resource: "table/<name>",
// "table/<name>/index/<index>", "table/<name>/stream", "schedule/<group>/<name>",
// "schedule-group/<group>", "role/<arn>", "queue/<url>", "key/<id>",
// "parameter/<name>", "foundation-model/<id>").
type Op struct {
	Function, Action, Resource string
}

// String is "function action resource".
func (o Op) String() string { return o.Function + " " + o.Action + " " + o.Resource }

// Recorder records the operations of the requests sent through its
// transport. The zero value is not ready: use NewRecorder.
type Recorder struct {
	mu  sync.Mutex
	ops map[Op]int
	// errs are requests that could not be classified (a new service or
	// operation this package does not know yet: the test must fail).
	errs []string
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{ops: map[Op]int{}} }

// Client returns an HTTP client for aws.Config.HTTPClient that records
// each request and sends it with http.DefaultTransport.
func (r *Recorder) Client() *http.Client {
	return &http.Client{Transport: roundTripper{r, http.DefaultTransport}}
}

// Ops returns the operations recorded so far, sorted.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Op, 0, len(r.ops))
	for o := range r.ops {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Errors returns the requests that could not be classified.
func (r *Recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

type roundTripper struct {
	r    *Recorder
	next http.RoundTripper
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	ops, err := Classify(req, body)
	fn := FunctionOf(req.Context())
	rt.r.mu.Lock()
	if err != nil {
		rt.r.errs = append(rt.r.errs, fmt.Sprintf("%s: %v", fn, err))
	}
	for _, o := range ops {
		o.Function = fn
		rt.r.ops[o]++
	}
	rt.r.mu.Unlock()
	return rt.next.RoundTrip(req)
}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/[0-9]{8}/[^/]+/([^/]+)/aws4_request`)

// Classify returns the IAM operations (without Function) of one signed AWS
// request with its body: the signing service from the SigV4 credential
// scope, the operation from X-Amz-Target (JSON protocols) or the method and
// path (Scheduler's REST protocol, Bedrock Runtime), the resource from the
// parameters. A TransactWriteItems is authorized per part (PutItem,
// UpdateItem, DeleteItem, ConditionCheckItem); creating a schedule with a
// role also passes the role (iam:PassRole). It fails on a request of a
// service or operation it does not know.
func Classify(req *http.Request, body []byte) ([]Op, error) {
	m := credentialScope.FindStringSubmatch(req.Header.Get("Authorization"))
	if m == nil {
		return nil, fmt.Errorf("%s %s: not a SigV4-signed AWS request", req.Method, req.URL.Path)
	}
	service := m[1]
	target := req.Header.Get("X-Amz-Target")
	var params map[string]any
	if len(body) > 0 && strings.Contains(req.Header.Get("Content-Type"), "json") {
		_ = json.Unmarshal(body, &params)
	}
	str := func(k string) string { v, _ := params[k].(string); return v }
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch {
	case service == "dynamodb" && strings.HasPrefix(target, "DynamoDBStreams_"):
		// Streams: DescribeStream and GetShardIterator name the stream;
		// GetRecords only an iterator. All act on the table's stream.
		return []Op{{Action: "dynamodb:" + op, Resource: "table-stream"}}, nil
	case service == "dynamodb" && op == "TransactWriteItems":
		var out []Op
		items, _ := params["TransactItems"].([]any)
		for _, it := range items {
			for part, v := range it.(map[string]any) {
				action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}[part]
				if action == "" {
					return nil, fmt.Errorf("TransactWriteItems: unknown part %q", part)
				}
				table, _ := v.(map[string]any)["TableName"].(string)
				out = append(out, Op{Action: "dynamodb:" + action, Resource: "table/" + table})
			}
		}
		return out, nil
	case service == "dynamodb" && target != "":
		res := "table/" + str("TableName")
		if ix := str("IndexName"); ix != "" {
			res += "/index/" + ix
		}
		return []Op{{Action: "dynamodb:" + op, Resource: res}}, nil
	case service == "sqs" && target != "":
		return []Op{{Action: "sqs:" + strings.TrimSuffix(op, "Batch"), Resource: "queue/" + str("QueueUrl")}}, nil
	case service == "kms" && target != "":
		return []Op{{Action: "kms:" + op, Resource: "key/" + str("KeyId")}}, nil
	case service == "events" && op == "PutEvents":
		// Authorized per bus the entries name.
		var out []Op
		entries, _ := params["Entries"].([]any)
		for _, e := range entries {
			bus, _ := e.(map[string]any)["EventBusName"].(string)
			if bus == "" {
				bus = "default"
			}
			out = append(out, Op{Action: "events:PutEvents", Resource: "event-bus/" + bus})
		}
		return out, nil
	case service == "ses" && req.Method == http.MethodPost && req.URL.Path == "/v2/email/outbound-emails":
		// SES v2 SendEmail: authorized on the sending identity.
		return []Op{{Action: "ses:SendEmail", Resource: "identity/" + str("FromEmailAddress")}}, nil
	case service == "ssm" && target != "":
		return []Op{{Action: "ssm:" + op, Resource: "parameter/" + str("Name")}}, nil
	case service == "scheduler":
		return classifyScheduler(req, params)
	case service == "bedrock":
		// Bedrock Runtime: POST /model/{modelId}/converse (or invoke);
		// Converse is authorized as bedrock:InvokeModel.
		parts := strings.Split(strings.Trim(req.URL.EscapedPath(), "/"), "/")
		if len(parts) == 3 && parts[0] == "model" {
			model, _ := url.PathUnescape(parts[1])
			return []Op{{Action: "bedrock:InvokeModel", Resource: "foundation-model/" + model}}, nil
		}
	}
	return nil, fmt.Errorf("%s %s %s (target %q): an AWS operation awsops does not classify", service, req.Method, req.URL.Path, target)
}

// classifyScheduler maps EventBridge Scheduler's REST operations.
func classifyScheduler(req *http.Request, params map[string]any) ([]Op, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	q := req.URL.Query()
	group := func() string {
		if g, _ := params["GroupName"].(string); g != "" {
			return g
		}
		if g := q.Get("groupName"); g != "" {
			return g
		}
		return "default"
	}
	switch {
	case parts[0] == "schedules" && len(parts) == 2:
		res := "schedule/" + group() + "/" + parts[1]
		switch req.Method {
		case http.MethodPost:
			ops := []Op{{Action: "scheduler:CreateSchedule", Resource: res}}
			if t, _ := params["Target"].(map[string]any); t != nil {
				if role, _ := t["RoleArn"].(string); role != "" {
					ops = append(ops, Op{Action: "iam:PassRole", Resource: "role/" + role})
				}
			}
			return ops, nil
		case http.MethodPut:
			return []Op{{Action: "scheduler:UpdateSchedule", Resource: res}}, nil
		case http.MethodDelete:
			return []Op{{Action: "scheduler:DeleteSchedule", Resource: res}}, nil
		case http.MethodGet:
			return []Op{{Action: "scheduler:GetSchedule", Resource: res}}, nil
		}
	case parts[0] == "schedules" && len(parts) == 1 && req.Method == http.MethodGet:
		g := q.Get("ScheduleGroup")
		if g == "" {
			g = "default"
		}
		return []Op{{Action: "scheduler:ListSchedules", Resource: "schedule-group/" + g}}, nil
	case parts[0] == "schedule-groups" && len(parts) == 2:
		action := map[string]string{http.MethodPost: "CreateScheduleGroup", http.MethodGet: "GetScheduleGroup", http.MethodDelete: "DeleteScheduleGroup"}[req.Method]
		if action != "" {
			return []Op{{Action: "scheduler:" + action, Resource: "schedule-group/" + parts[1]}}, nil
		}
	}
	return nil, fmt.Errorf("scheduler %s %s: an operation awsops does not classify", req.Method, req.URL.Path)
}

// Who, besides the functions, makes AWS calls in the local AWS mode: what
// CloudFormation does on AWS (creating the table, group and queue), and
// what EventBridge Scheduler does itself (listing and deleting the
// schedules it fires). Their calls need no function's role.
const (
	Deployment       = "deployment"
	SchedulerService = "scheduler-service"
	// TestHarness tags a test's own look at the emulated services.
	TestHarness = "test-harness"
)

// Init tags what the runtime reads when it starts (awsrt.New): every
// function that starts it (api, clock, stream) makes those calls.
const Init = "init"
