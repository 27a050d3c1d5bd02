package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/agentclock/clockwork/internal/authorizer"
	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// awsRecorder, while TestAWSMode runs, records every AWS request of the
// runtime with the function that made it.
var awsRecorder *awsops.Recorder

// recordingAWSClient is the AWS HTTP client of the runtimes TestAWSMode
// starts (nil otherwise: the SDK's default).
func recordingAWSClient() aws.HTTPClient {
	if awsRecorder == nil {
		return nil
	}
	return awsRecorder.Client()
}

// AWSOperationsFile lists, per function, every AWS operation (IAM action
// and resource kind) the functions performed in TestAWSMode; the infra
// tests check each function's role against it (infra/iam_test.go).
const AWSOperationsFile = "../../infra/testdata/aws-operations.json"

// AWSOperations is the content of AWSOperationsFile.
type AWSOperations struct {
	Comment   string              `json:"comment"`
	Functions map[string][]string `json:"functions"`
}

// resourceKinds maps the resources the emulated run names (its tables,
// groups, queues, keys and parameters have test names) to what they are
// in the stack.
var resourceKinds = []struct {
	pattern *regexp.Regexp
	kind    string
}{
	{regexp.MustCompile(`^table/cw-[0-9a-f]+$`), "table"},
	{regexp.MustCompile(`^table/cw-[0-9a-f]+/index/[^/]+$`), "table-index"},
	{regexp.MustCompile(`^table-stream$`), "table-stream"},
	{regexp.MustCompile(`^schedule/cw-[0-9a-f]+/[^/]+$`), "group-schedules"},
	{regexp.MustCompile(`^role/arn:aws:iam::000000000000:role/scheduler$`), "scheduler-role"},
	{regexp.MustCompile(`^queue/http://[^/]+/[0-9]+/cw-[0-9a-f]+-timers$`), "timer-queue"},
	{regexp.MustCompile(`^queue/http://[^/]+/[0-9]+/cw-[0-9a-f]+-grading$`), "grading-queue"},
	{regexp.MustCompile(`^key/[0-9a-f-]{36}$`), "credentials-key"},
	{regexp.MustCompile(`^parameter//clockwork/test/cw-[0-9a-f]+/verify-signing-key$`), "signing-key-parameter"},
	{regexp.MustCompile(`^parameter//clockwork/test/cw-[0-9a-f]+/judge-api-key$`), "judge-key-parameter"},
	{regexp.MustCompile(`^parameter//clockwork/test/tokens$`), "tokens-parameter"},
	{regexp.MustCompile(`^foundation-model/.+$`), "judge-model"},
	{regexp.MustCompile(`^event-bus/ops-bus-cw-[0-9a-f]+$`), "alert-event-bus"},
	{regexp.MustCompile(`^identity/clockwork@example\.com$`), "ses-identity"},
}

func resourceKind(res string) (string, bool) {
	for _, k := range resourceKinds {
		if k.pattern.MatchString(res) {
			return k.kind, true
		}
	}
	return "", false
}

// recordAWSOperations records TestAWSMode's AWS requests and, when it
// ends, checks them against AWSOperationsFile: every operation a function
// performed must be listed there (so the infra test proves its role grants
// it), and after a complete run every listed operation must have been
// performed (so the role grants nothing unused). With
// CLOCKWORK_UPDATE_AWS_OPERATIONS=1 it writes the file instead.
func recordAWSOperations(t *testing.T) {
	awsRecorder = awsops.NewRecorder()
	t.Cleanup(func() {
		rec := awsRecorder
		awsRecorder = nil
		failed := t.Failed()
		recordAuthorizer(t, rec)
		for _, e := range rec.Errors() {
			t.Errorf("unclassified AWS request: %s", e)
		}
		got := map[string][]string{}
		for _, op := range rec.Ops() {
			switch op.Function {
			case awsops.Deployment, awsops.SchedulerService, awsops.TestHarness:
				continue // CloudFormation's, Scheduler's and the test's own calls
			case "":
				t.Errorf("an AWS call made outside any function (untagged context): %s %s", op.Action, op.Resource)
				continue
			}
			kind, ok := resourceKind(op.Resource)
			if !ok {
				t.Errorf("%s: %s on %s, a resource the stack does not have", op.Function, op.Action, op.Resource)
				continue
			}
			entry := op.Action + " " + kind
			if !slices.Contains(got[op.Function], entry) {
				got[op.Function] = append(got[op.Function], entry)
			}
		}
		for _, v := range got {
			sort.Strings(v)
		}
		if os.Getenv("CLOCKWORK_UPDATE_AWS_OPERATIONS") == "1" {
			writeAWSOperations(t, got)
			return
		}
		var want AWSOperations
		b, err := os.ReadFile(AWSOperationsFile)
		if err == nil {
			err = json.Unmarshal(b, &want)
		}
		if err != nil {
			t.Fatalf("%s: %v (write it with CLOCKWORK_UPDATE_AWS_OPERATIONS=1 go test ./internal/app -run TestAWSMode)", AWSOperationsFile, err)
		}
		for fn, ops := range got {
			for _, op := range ops {
				if !slices.Contains(want.Functions[fn], op) {
					t.Errorf("the %s function performed %s, which %s does not list: add it there (CLOCKWORK_UPDATE_AWS_OPERATIONS=1) and grant it in infra/stack.go", fn, op, AWSOperationsFile)
				}
			}
		}
		if fullAWSRun() && !failed {
			for fn, ops := range want.Functions {
				for _, op := range ops {
					if !slices.Contains(got[fn], op) {
						t.Errorf("%s lists %s for the %s function, which the whole run never performed: remove it there and its grant in infra/stack.go", AWSOperationsFile, op, fn)
					}
				}
			}
		}
	})
}

// fullAWSRun reports whether every scenario of TestAWSMode ran.
func fullAWSRun() bool {
	f := flagValue("test.run")
	return f == "" || f == "TestAWSMode" || f == "^TestAWSMode$" || f == "AWSMode"
}

func flagValue(name string) string {
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
	}
	return ""
}

func writeAWSOperations(t *testing.T, got map[string][]string) {
	out := AWSOperations{
		Comment: "Every AWS operation (IAM action, resource kind) each function performed in TestAWSMode (internal/app/awsops_test.go), " +
			"\"init\" being what every function reads when the runtime starts; infra/iam_test.go checks each function's role against it. " +
			"Regenerate with CLOCKWORK_UPDATE_AWS_OPERATIONS=1 go test ./internal/app -run TestAWSMode.",
		Functions: got,
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(filepath.FromSlash(AWSOperationsFile), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", AWSOperationsFile)
}

// recordAuthorizer runs the authorizer function as it is deployed (its
// tokens file in an SSM SecureString, read with awsclient.Parameter as
// authorizer.FromEnv wires it) on the emulator, recording its calls.
func recordAuthorizer(t *testing.T, rec *awsops.Recorder) {
	name := "/clockwork/test/tokens"
	_, err := ssm.NewFromConfig(dynamotest.Config(emulatorEndpoint)).PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true), Value: aws.String(tokensJSON(t)),
	})
	if err != nil {
		t.Fatalf("SSM PutParameter on the emulator: %v", err)
	}
	ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: emulatorEndpoint, AWSHTTPClient: rec.Client()})
	if err != nil {
		t.Fatal(err)
	}
	a := &authorizer.Authorizer{Load: func(ctx context.Context) ([]byte, error) {
		v, err := awsclient.Parameter(ctx, ac, name)
		return []byte(v), err
	}}
	ctx := awsops.WithFunction(context.Background(), "authorizer")
	res, err := a.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{
		Type: "REQUEST", RouteKey: "GET /v1/deadletters", Headers: map[string]string{"authorization": "Bearer " + adminToken},
	})
	if err != nil || !res.IsAuthorized {
		t.Errorf("authorizer on the emulator's tokens parameter: authorized %v, %v", res.IsAuthorized, err)
	}
}
