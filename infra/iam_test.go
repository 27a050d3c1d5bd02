package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The IAM sufficiency and least-privilege check. testdata/aws-operations.json
// lists every AWS operation (IAM action and resource kind) each function
// performed in the AWS-mode end-to-end run (internal/app, TestAWSMode, which
// fails when a function performs one the file does not list). Here each
// function's role in the synthesized template must grant exactly those, plus
// what Lambda does with the role on the function's behalf, which the
// template itself declares (platformNeeds): every action a function uses,
// on that resource, and nothing else.

// awsOperations is testdata/aws-operations.json.
type awsOperations struct {
	Functions map[string][]string `json:"functions"`
}

func loadAWSOperations(t *testing.T) awsOperations {
	t.Helper()
	var ops awsOperations
	b, err := os.ReadFile("testdata/aws-operations.json")
	if err == nil {
		err = json.Unmarshal(b, &ops)
	}
	if err != nil {
		t.Fatalf("testdata/aws-operations.json: %v", err)
	}
	return ops
}

// initEnv names, for an operation the runtime makes when it starts ("init"
// in the file), the environment variable without which it is not made; an
// init operation on any other resource is made by every function that
// starts the runtime (those with TABLE_NAME).
var initEnv = map[string]string{
	"signing-key-parameter": "SIGNING_KEY_PARAMETER",
	"judge-key-parameter":   "JUDGE_API_KEY_PARAMETER",
	"tokens-parameter":      "TOKENS_PARAMETER",
}

// featureEnv names, for operations on an optional resource, the
// environment variable (and value) of the function that uses it.
// ("*": any value but none).
var featureEnv = map[string][2]string{
	"judge-model":     {"JUDGE_KIND", "bedrock"},
	"alert-event-bus": {"EVENTBRIDGE_ALERTS", "true"},
	"ses-identity":    {"SES_FROM", "*"},
}

// templateView resolves a synthesized template's IAM statements into
// (function, action, resource kind) grants.
type templateView struct {
	tj    obj
	kinds map[string]string // logical id -> resource kind
	fns   map[string]string // function logical id -> name (api, ...)
}

func newTemplateView(tj obj, stackName string) *templateView {
	v := &templateView{tj: tj, kinds: map[string]string{"Table": "table"}, fns: map[string]string{}}
	for id, r := range resources(tj, "AWS::SQS::Queue") {
		name := fmt.Sprint(props(r)["QueueName"])
		v.kinds[id] = map[string]string{
			stackName + "-timers": "timer-queue", stackName + "-timers-dlq": "timer-dlq",
			stackName + "-scheduler-dlq": "scheduler-dlq", stackName + "-stream-failures": "stream-failure-queue",
			stackName + "-grading": "grading-queue", stackName + "-grading-dlq": "grading-dlq",
		}[name]
	}
	for id, r := range resources(tj, "AWS::IAM::Role") {
		if strings.HasPrefix(fmt.Sprint(props(r)["Description"]), "Assumed by EventBridge Scheduler") {
			v.kinds[id] = "scheduler-role"
		}
	}
	for id := range resources(tj, "AWS::KMS::Key") {
		v.kinds[id] = "credentials-key"
	}
	for id, r := range resources(tj, "AWS::Lambda::Function") {
		name := strings.TrimPrefix(fmt.Sprint(props(r)["FunctionName"]), stackName+"-")
		v.fns[id] = name
		if lg, ok := props(r)["LoggingConfig"].(obj)["LogGroup"].(obj); ok {
			v.kinds[fmt.Sprint(lg["Ref"])] = "own-log-group:" + name
		}
	}
	return v
}

// kind names the resource an IAM Resource expression designates.
func (v *templateView) kind(res any) string {
	switch r := res.(type) {
	case string:
		if r == "*" {
			return "*"
		}
	case obj:
		if ga, ok := r["Fn::GetAtt"].([]any); ok {
			id, attr := fmt.Sprint(ga[0]), fmt.Sprint(ga[1])
			if id == "Table" && attr == "StreamArn" {
				return "table-stream"
			}
			if k := v.kinds[id]; k != "" {
				return k
			}
		}
		if _, ok := r["Ref"]; ok {
			if k := v.kinds[fmt.Sprint(r["Ref"])]; k != "" {
				return k
			}
		}
		b, _ := json.Marshal(r)
		s := string(b)
		switch {
		case strings.Contains(s, `"Table","Arn"`) && strings.Contains(s, `/index/*`):
			return "table-index"
		case strings.Contains(s, `:schedule/`):
			return "group-schedules"
		case strings.Contains(s, `foundation-model/`):
			return "judge-model"
		case strings.Contains(s, `:event-bus/`):
			return "alert-event-bus"
		case strings.Contains(s, `:identity/`):
			return "ses-identity"
		case strings.Contains(s, `:parameter/`) && strings.HasSuffix(strings.TrimSuffix(s, `"]]}`), "/tokens"):
			return "tokens-parameter"
		case strings.Contains(s, `:parameter/`) && strings.Contains(s, "verify-key"):
			return "signing-key-parameter"
		case strings.Contains(s, `:parameter/`):
			return "judge-key-parameter"
		}
	}
	b, _ := json.Marshal(res)
	return "unknown:" + string(b)
}

// grants returns, per function name, the "action kind" pairs its role
// allows.
func (v *templateView) grants() map[string][]string {
	roleFn := map[string]string{}
	for id, r := range resources(v.tj, "AWS::Lambda::Function") {
		roleFn[fmt.Sprint(props(r)["Role"].(obj)["Fn::GetAtt"].([]any)[0])] = v.fns[id]
	}
	out := map[string][]string{}
	for _, p := range resources(v.tj, "AWS::IAM::Policy") {
		doc := props(p)["PolicyDocument"].(obj)
		for _, role := range list(props(p)["Roles"]) {
			fn := roleFn[fmt.Sprint(role.(obj)["Ref"])]
			if fn == "" {
				continue
			}
			for _, st := range list(doc["Statement"]) {
				s := st.(obj)
				if s["Effect"] != "Allow" {
					continue
				}
				for _, a := range list(s["Action"]) {
					for _, r := range list(s["Resource"]) {
						g := fmt.Sprint(a) + " " + v.kind(r)
						if !slices.Contains(out[fn], g) {
							out[fn] = append(out[fn], g)
						}
					}
				}
			}
		}
	}
	return out
}

// env returns a function's environment variables.
func (v *templateView) env(fn string) map[string]any {
	for id, r := range resources(v.tj, "AWS::Lambda::Function") {
		if v.fns[id] == fn {
			e, _ := props(r)["Environment"].(obj)["Variables"].(obj)
			return e
		}
	}
	return nil
}

// platformNeeds are what Lambda does with a function's role on its behalf,
// as the template configures it (Lambda developer guide, execution role
// permissions): its logs; X-Ray when tracing is active; sending to its
// asynchronous dead-letter queue; reading the stream of a DynamoDB event
// source (DescribeStream, GetRecords, GetShardIterator on the stream,
// ListStreams, which takes no resource) and sending to its on-failure
// destination; receiving, deleting and reading the attributes of an SQS
// event source's queue.
func (v *templateView) platformNeeds() map[string][]string {
	out := map[string][]string{}
	add := func(fn string, needs ...string) {
		for _, n := range needs {
			if !slices.Contains(out[fn], n) {
				out[fn] = append(out[fn], n)
			}
		}
	}
	for id, r := range resources(v.tj, "AWS::Lambda::Function") {
		fn, p := v.fns[id], props(r)
		add(fn, "logs:CreateLogStream own-log-group:"+fn, "logs:PutLogEvents own-log-group:"+fn)
		if tc, _ := p["TracingConfig"].(obj); tc["Mode"] == "Active" {
			add(fn, "xray:PutTraceSegments *", "xray:PutTelemetryRecords *")
		}
		if dl, _ := p["DeadLetterConfig"].(obj); dl != nil {
			add(fn, "sqs:SendMessage "+v.kind(dl["TargetArn"]))
		}
	}
	for _, r := range resources(v.tj, "AWS::Lambda::EventSourceMapping") {
		p := props(r)
		var fn string
		for id, name := range v.fns {
			if fmt.Sprint(p["FunctionName"]) == fmt.Sprint(ref(id)) {
				fn = name
			}
		}
		switch src := v.kind(p["EventSourceArn"]); src {
		case "table-stream":
			add(fn, "dynamodb:DescribeStream table-stream", "dynamodb:GetRecords table-stream", "dynamodb:GetShardIterator table-stream", "dynamodb:ListStreams *")
		default:
			add(fn, "sqs:ReceiveMessage "+src, "sqs:DeleteMessage "+src, "sqs:GetQueueAttributes "+src)
		}
		if dc, _ := p["DestinationConfig"].(obj); dc != nil {
			add(fn, "sqs:SendMessage "+v.kind(dc["OnFailure"].(obj)["Destination"]))
		}
	}
	return out
}

// notExercised are operations a function performs on AWS that the
// end-to-end run cannot show, with the reason; they count as used.
var notExercised = map[string][]string{
	// The clock function sends the retries of lapse deliveries after their
	// backoff, with the agent's credentials opened by KMS. The local AWS
	// mode runs every function in one process, whose credentials cache
	// (5 minutes) the stream handler's first attempt has already filled,
	// so the run never sees the clock's own Decrypt; on AWS each function
	// has its own cache.
	"clock": {"kms:Decrypt credentials-key"},
	// The API function opens a channel's secret to send its test; the
	// local AWS mode's one process shares the opened-secret cache
	// (internal/notify, 5 minutes) with the clock's attempts, so the run
	// may not show the API's own Decrypt.
	"api": {"kms:Decrypt credentials-key"},
}

// featureOn reports whether a function's environment turns the feature on.
func featureOn(env map[string]any, fe [2]string) bool {
	v, set := env[fe[0]]
	if fe[1] == "*" {
		return set && fmt.Sprint(v) != ""
	}
	return fmt.Sprint(v) == fe[1]
}

// required returns, per function, what its role must grant: what it
// performed in the end-to-end run (the init operations where the function
// is configured to make them, optional features where configured), and
// the platform's needs.
func (v *templateView) required(ops awsOperations) map[string][]string {
	out := v.platformNeeds()
	add := func(fn, op string) {
		if !slices.Contains(out[fn], op) {
			out[fn] = append(out[fn], op)
		}
	}
	for _, fn := range Functions {
		env := v.env(fn)
		for _, op := range append(slices.Clone(ops.Functions[fn]), notExercised[fn]...) {
			kind := op[strings.IndexByte(op, ' ')+1:]
			if fe, ok := featureEnv[kind]; ok && !featureOn(env, fe) {
				continue
			}
			add(fn, op)
		}
		for _, op := range ops.Functions["init"] {
			kind := op[strings.IndexByte(op, ' ')+1:]
			if name, ok := initEnv[kind]; ok {
				if env[name] == nil {
					continue
				}
			} else if env["TABLE_NAME"] == nil {
				continue
			}
			add(fn, op)
		}
	}
	return out
}

// checkIAM returns every difference between what each function's role
// grants and what it needs, one sentence each.
func checkIAM(tj obj, stackName string, ops awsOperations) []string {
	v := newTemplateView(tj, stackName)
	granted, need := v.grants(), v.required(ops)
	var problems []string
	for _, fn := range Functions {
		for _, op := range need[fn] {
			if !slices.Contains(granted[fn], op) {
				problems = append(problems, fmt.Sprintf("the %s function needs %s but its role does not grant it", fn, op))
			}
		}
		for _, g := range granted[fn] {
			if !slices.Contains(need[fn], g) {
				problems = append(problems, fmt.Sprintf("the %s function's role grants %s, which it never uses", fn, g))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// TestIAMSufficientAndLeast checks every synthesized stack (the stages,
// and the stacks with a model judge and the signing key) against the
// operations of the end-to-end run.
func TestIAMSufficientAndLeast(t *testing.T) {
	all := map[string]*synthesized{}
	for stage, sy := range synth(t) {
		all[stage] = sy
	}
	for kind, sy := range synthJudges(t) {
		all["judge-"+kind] = sy
	}
	ops := loadAWSOperations(t)
	for name, sy := range all {
		t.Run(name, func(t *testing.T) {
			for _, p := range checkIAM(sy.json, sy.cfg.Name, ops) {
				t.Error(p)
			}
		})
	}
}

// TestIAMCheckCatchesChanges shows the check failing: a template with one
// statement (or one action) removed is reported as missing that grant,
// one with an action added as granting what is never used.
func TestIAMCheckCatchesChanges(t *testing.T) {
	sy := synthJudges(t)["openai"]
	ops := loadAWSOperations(t)
	stack := sy.cfg.Name
	if p := checkIAM(sy.json, stack, ops); len(p) != 0 {
		t.Fatalf("the unchanged template already fails: %v", p)
	}
	cases := []struct {
		name   string
		sid    string // statement to change
		action string // action to remove ("" : the whole statement)
		add    string // action to add instead
		want   string
	}{
		{"stream loses the Schedules statement", "Schedules", "", "", "the stream function needs scheduler:CreateSchedule group-schedules but its role does not grant it"},
		{"stream may no longer pass the scheduler role", "PassSchedulerRole", "", "", "the stream function needs iam:PassRole scheduler-role"},
		{"api loses kms:GenerateDataKey", "SealCredentials", "", "", "the api function needs kms:GenerateDataKey credentials-key"},
		{"a function that sends lapse tasks loses kms:Decrypt", "OpenCredentials", "", "", "needs kms:Decrypt credentials-key but its role does not grant it"},
		{"clock loses sqs:SendMessage to the timer queue", "TimerQueueRearm", "", "", "the clock function needs sqs:SendMessage timer-queue"},
		{"authorizer cannot read the tokens", "ReadTokens", "", "", "the authorizer function needs ssm:GetParameter tokens-parameter"},
		{"grader cannot read the judge's key", "JudgeAPIKey", "", "", "the grader function needs ssm:GetParameter judge-key-parameter"},
		{"stream loses sqs:SendMessage to the grading queue", "GradingQueue", "", "", "the stream function needs sqs:SendMessage grading-queue"},
		{"api cannot start evaluations", "EvaluationSteps", "", "", "the api function needs sqs:SendMessage grading-queue"},
		{"a function loses dynamodb:PutItem", "TableItems", "dynamodb:PutItem", "", "needs dynamodb:PutItem table but its role does not grant it"},
		{"a function gains dynamodb:Scan", "TableItems", "", "dynamodb:Scan", "grants dynamodb:Scan table, which it never uses"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tj obj
			b, _ := json.Marshal(sy.json)
			_ = json.Unmarshal(b, &tj)
			changed := false
			for _, p := range resources(tj, "AWS::IAM::Policy") {
				doc := props(p)["PolicyDocument"].(obj)
				var kept []any
				for _, st := range list(doc["Statement"]) {
					s := st.(obj)
					if s["Sid"] != c.sid || changed {
						kept = append(kept, s)
						continue
					}
					changed = true
					switch {
					case c.add != "":
						s["Action"] = append(list(s["Action"]), c.add)
						kept = append(kept, s)
					case c.action != "":
						var acts []any
						for _, a := range list(s["Action"]) {
							if a != c.action {
								acts = append(acts, a)
							}
						}
						s["Action"] = acts
						kept = append(kept, s)
					}
				}
				doc["Statement"] = kept
			}
			if !changed {
				t.Fatalf("no statement %s in the template", c.sid)
			}
			problems := checkIAM(tj, stack, ops)
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p, c.want)
			}
			if !found {
				t.Errorf("the check did not report %q; it reported %v", c.want, problems)
			}
		})
	}
}

// envOf returns the environment of the stack's function named fn.
func (v *templateView) envOf(stack, fn string) map[string]any {
	for _, r := range resources(v.tj, "AWS::Lambda::Function") {
		if strings.TrimPrefix(fmt.Sprint(props(r)["FunctionName"]), stack+"-") == fn {
			e, _ := props(r)["Environment"].(obj)["Variables"].(obj)
			return e
		}
	}
	return nil
}
