package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Route is one route of the HTTP API. Every route goes to the API function;
// the list mirrors the patterns internal/httpapi registers (a test keeps the
// two in step), so a request for anything else is refused by API Gateway
// without invoking (or billing) a function. Every route but the public ones
// goes through the Lambda authorizer.
type Route struct {
	Method, Path string
	Public       bool
}

// Routes of the HTTP API.
var Routes = []Route{
	{"GET", "/healthz", true},
	{"GET", "/openapi.json", true},
	{"PUT", "/v1/agents/{agentId}", false},
	{"GET", "/v1/agents/{agentId}", false},
	{"DELETE", "/v1/agents/{agentId}", false},
	{"POST", "/v1/agents/{agentId}/expectations", false},
	{"GET", "/v1/agents/{agentId}/expectations", false},
	{"GET", "/v1/agents/{agentId}/expectations/{expectationId}", false},
	{"POST", "/v1/agents/{agentId}/expectations/{expectationId}/redeliver", false},
	{"POST", "/v1/agents/{agentId}/expectations/{expectationId}/ack", false},
	{"POST", "/v1/agents/{agentId}/facts", false},
	{"POST", "/v1/agents/{agentId}/withdrawals", false},
	{"POST", "/v1/agents/{agentId}/a2a", false},
	{"POST", "/v1/watches/{agentId}/{expectationId}", true},
	{"PUT", "/v1/agents/{agentId}/heartbeats/{name}", false},
	{"GET", "/v1/agents/{agentId}/heartbeats", false},
	{"GET", "/v1/agents/{agentId}/heartbeats/{name}", false},
	{"DELETE", "/v1/agents/{agentId}/heartbeats/{name}", false},
	{"POST", "/v1/agents/{agentId}/heartbeats/{name}/pause", false},
	{"POST", "/v1/agents/{agentId}/heartbeats/{name}/resume", false},
	{"POST", "/v1/agents/{agentId}/heartbeats/{name}/ping", false},
	{"POST", "/v1/agents/{agentId}/heartbeats/{name}/ping/start", false},
	{"POST", "/v1/agents/{agentId}/heartbeats/{name}/ping/fail", false},
	{"PUT", "/v1/agents/{agentId}/credentials", false},
	{"GET", "/v1/agents/{agentId}/credentials", false},
	{"DELETE", "/v1/agents/{agentId}/credentials", false},
	{"GET", "/v1/deadletters", false},
	{"POST", "/v1/anticipations", false},
	{"PUT", "/v1/anticipations/{id}", false},
	{"GET", "/v1/anticipations/{id}", false},
	{"GET", "/v1/anticipations/{id}/verifications", false},
	{"POST", "/v1/executions/{planId}/events", false},
	{"GET", "/v1/executions/{planId}/events", false},
	{"GET", "/v1/verifications/{verificationId}", false},
	{"GET", "/v1/verifications/{verificationId}/bundle", false},
	{"POST", "/v1/verifications/{verificationId}/grades", false},
	{"GET", "/v1/keys/verify", false},
	{"POST", "/v1/evaluations", false},
	{"GET", "/v1/evaluations/{evaluationId}", false},
	{"GET", "/v1/agents/{agentId}/evaluations", false},
	{"PUT", "/v1/agents/{agentId}/evaluators/{name}", false},
	{"GET", "/v1/agents/{agentId}/evaluators", false},
	{"GET", "/v1/agents/{agentId}/evaluators/{name}", false},
	{"DELETE", "/v1/agents/{agentId}/evaluators/{name}", false},
	{"GET", "/v1/agents/{agentId}/evaluators/{name}/verifications", false},
	{"PUT", "/v1/review-queues/{queueId}", false},
	{"GET", "/v1/review-queues", false},
	{"GET", "/v1/review-queues/{queueId}", false},
	{"DELETE", "/v1/review-queues/{queueId}", false},
	{"GET", "/v1/review-queues/{queueId}/items", false},
	{"GET", "/v1/review-queues/{queueId}/items/{itemId}", false},
	{"POST", "/v1/review-queues/{queueId}/items/{itemId}/reviews", false},
	{"GET", "/v1/review-queues/{queueId}/agreement", false},
	{"POST", "/mcp", false}, // the MCP endpoint (internal/mcpapi): tools for LLM agents
	// The web console: its page and files are public (no authorizer); its
	// data comes through the routes above with the token the person enters.
	{"GET", "/console", true},
	{"GET", "/console/{asset}", true},
	{"GET", "/v1/agents", false},
	{"GET", "/v1/agents/{agentId}/anticipations", false},
	// Alerts (internal/notify): channels, each agent's rules, dead
	// notifications and an expectation's notifications.
	{"PUT", "/v1/channels/{channelId}", false},
	{"GET", "/v1/channels", false},
	{"GET", "/v1/channels/{channelId}", false},
	{"DELETE", "/v1/channels/{channelId}", false},
	{"POST", "/v1/channels/{channelId}/test", false},
	{"GET", "/v1/channels/{channelId}/deadletters", false},
	{"POST", "/v1/channels/{channelId}/deadletters/{notificationId}/replay", false},
	{"PUT", "/v1/silences/{silenceId}", false},
	{"GET", "/v1/silences", false},
	{"GET", "/v1/silences/{silenceId}", false},
	{"DELETE", "/v1/silences/{silenceId}", false},
	{"PUT", "/v1/agents/{agentId}/alerts", false},
	{"GET", "/v1/agents/{agentId}/alerts", false},
	{"DELETE", "/v1/agents/{agentId}/alerts", false},
	{"GET", "/v1/agents/{agentId}/notifications", false},
	// OTLP traces in (internal/otlpin), served by the ingest function.
	{"POST", "/v1/traces", false},
}

// PushRoute is the route where A2A pushes land, which takes the A2A 0.3
// X-A2A-Notification-Token as well (auth.PushRoute; a test keeps the two
// equal: importing internal/auth here would link net into the CDK app).
const PushRoute = "POST /v1/agents/{agentId}/a2a"

// AuthorizerCacheTTLS is how long API Gateway reuses the authorizer's answer
// for one Authorization header. With the authorizer's own refresh of the
// tokens file (authorizer.DefaultRefresh) it bounds how long a revoked
// token keeps working: at most two minutes.
const AuthorizerCacheTTLS = 60

// Stream event source settings (see docs/operations.md). MaxRecordAge: a
// record the stream function has not processed after that long goes to the
// stream failure queue, whose message holds only the record's shard and
// sequence numbers; the stream keeps records 24 h, so 12 h leaves half the
// retention to read them again after a fix (docs/operations.md,
// "Production review").
const (
	StreamBatchSize      = 10
	StreamRetryAttempts  = 10
	StreamMaxRecordAgeHr = 12
	// StreamParallelization is the batches of one shard processed at once.
	StreamParallelization = 2
)

// Queue retention (days): the source queues' (timers, grading) shorter
// than their dead-letter queues', since SQS counts a dead letter's
// retention from when it entered the source queue.
const (
	SourceRetentionDays = 4
	DLQRetentionDays    = 14
)

// Function settings: memory (MB) and timeout (s).
const (
	FunctionMemoryMB   = 256
	AuthorizerTimeoutS = 5   // API Gateway waits at most 10 s for an authorizer
	APITimeoutS        = 25  // under API Gateway's 30 s integration limit
	ClockTimeoutS      = 30  // one instant: a read and a conditional write
	GraderTimeoutS     = 120 // one judge call (at most 60 s) and the VERIFY's read and write
	StreamTimeoutS     = 300 // a batch, with lapse deliveries and their backoff
)

// TableActions are the item-level DynamoDB actions the functions use (the
// adapter's GetItem, Query, PutItem, UpdateItem, DeleteItem and
// TransactWriteItems, whose parts are authorised as the single-item actions
// plus ConditionCheckItem). Queries on the indexes need dynamodb:Query on
// table/index/*.
var TableActions = []string{
	"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
	"dynamodb:DeleteItem", "dynamodb:ConditionCheckItem",
}

// TableActionsOf are the TableActions each function performs on the table,
// and IndexQueries the functions that query its indexes, as the
// end-to-end run recorded them (infra/testdata/aws-operations.json; the
// IAM check, infra/iam_test.go, holds the roles to them): the api does
// everything; the clock reads records and writes them whole, queries the
// open-instant index in the sweep, and, redoing the effects of a change
// the stream lost (package effects), queries the markers' and lookup
// entries' partitions and writes entries as the stream does; the stream
// reads lookup entries and records and writes them and their entries, and
// reads no index; the grader reads a VERIFY, its anticipation and
// execution (a long one's aggregate chunks with a query), writes the VERIFY
// whole, and runs the steps of evaluations (claims, results, progress);
// the ingest
// function appends events as the API does (no index, no deletes).
var (
	TableActionsOf = map[string][]string{
		"api":    TableActions,
		"clock":  {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
		"grader": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		"ingest": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
		"stream": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
	}
	IndexQueries = map[string]bool{"api": true, "clock": true}
	// TracesRoute is the route API Gateway sends to the ingest function.
	TracesRoute = "POST /v1/traces"
)

// Timer queue settings: the clock function consumes it in batches of
// TimerBatchSize, reporting failed messages; a message is visible again
// after TimerVisibilityS (six times the clock function's timeout, as Lambda
// advises for an SQS event source) and goes to the timer DLQ after
// TimerMaxReceives receives. SweepExpression is the sweep schedule.
const (
	TimerBatchSize    = 10
	TimerVisibilityS  = 6 * ClockTimeoutS
	TimerMaxReceives  = 5
	SweepExpression   = "rate(1 minute)"
	SweepInput        = `{"action":"sweep","scheduledTime":"<aws.scheduler.scheduled-time>"}`
	SweepMaxEventAgeS = 60 // a sweep that cannot run within a minute is replaced by the next one
)

// Grading queue settings (internal/awsrt, grading.go): one message per
// HEURISTIC criterion waiting for the model judge, consumed by the grader
// function GradingBatchSize at a time (they run concurrently); visible
// again after GradingVisibilityS (six times the grader's timeout), to the
// grading DLQ after GradingMaxReceives receives (the sweep's repair puts
// the job back anyway).
const (
	GradingBatchSize   = 4
	GradingVisibilityS = 6 * GraderTimeoutS
	GradingMaxReceives = 5
)

// SchedulerActions are what the stream function does to the schedules of
// its group.
var SchedulerActions = []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule"}

// StackProps configures NewStack.
type StackProps struct {
	awscdk.StackProps
	Config Config
	// FunctionDirs maps each name in Functions to a directory holding its
	// bootstrap executable (see BuildFunctions).
	FunctionDirs map[string]string
}

// Stack is the deployed service.
type Stack struct {
	awscdk.Stack
	Table              awsdynamodb.Table
	API, Clock, Stream awslambda.Function
	// Grader grades HEURISTIC criteria with the model judge, one job of the
	// grading queue at a time.
	Grader awslambda.Function
	// Ingest serves POST /v1/traces (OTLP), apart from the API function.
	Ingest                awslambda.Function
	GradingQueue          awssqs.Queue
	GradingDLQ            awssqs.Queue
	Authorizer            awslambda.Function
	HTTPAPI               awsapigatewayv2.HttpApi
	HTTPStage             awsapigatewayv2.HttpStage
	ScheduleGroup         awsscheduler.ScheduleGroup
	SchedulerRole         awsiam.Role
	SchedulerDLQ          awssqs.Queue
	StreamFailureQueue    awssqs.Queue
	TimerQueue, TimerDLQ  awssqs.Queue
	SweepSchedule         awsscheduler.CfnSchedule
	AlarmTopic            awssns.Topic
	Alarms                []awscloudwatch.Alarm
	APIOutput, TableOuput awscdk.CfnOutput
	// CredentialsKey seals agents' outbound credentials (envelope
	// encryption): the API function may only generate data keys, the
	// functions that send lapse tasks (stream, clock) may only decrypt.
	CredentialsKey awskms.Key
	// Dashboard shows the service's health (observability.go); add rows
	// with AddDashboardRow.
	Dashboard awscloudwatch.Dashboard
}

func s(v string) *string   { return jsii.String(v) }
func n(v float64) *float64 { return jsii.Number(v) }
func b(v bool) *bool       { return jsii.Bool(v) }
func strs(v ...string) *[]*string {
	return jsii.Strings(v...)
}

func retention(days int) awslogs.RetentionDays {
	switch days {
	case 7:
		return awslogs.RetentionDays_ONE_WEEK
	case 30:
		return awslogs.RetentionDays_ONE_MONTH
	case 90:
		return awslogs.RetentionDays_THREE_MONTHS
	case 365:
		return awslogs.RetentionDays_ONE_YEAR
	}
	panic(fmt.Sprintf("no log retention of %d days", days))
}

// NewStack defines the stack: the table, the three functions, the HTTP API,
// the schedule group and the role Scheduler assumes, the stream mapping, the
// dead-letter queues and the alarms.
func NewStack(scope constructs.Construct, id string, props *StackProps) *Stack {
	cfg := props.Config
	sp := props.StackProps
	if sp.StackName == nil {
		sp.StackName = s(cfg.Name)
	}
	// Synth fails on a configuration that must not be deployed (outside
	// dev: no alarm subscription), saying what to pass.
	if err := cfg.Check(); err != nil {
		panic(err.Error())
	}
	if sp.TerminationProtection == nil {
		sp.TerminationProtection = b(cfg.TerminationProtection())
	}
	if sp.Description == nil {
		sp.Description = s(fmt.Sprintf("clockwork (%s): expectations watcher and evaluation loop, Lambda + API Gateway + DynamoDB + EventBridge Scheduler", cfg.Stage))
	}
	st := &Stack{Stack: awscdk.NewStack(scope, s(id), &sp)}
	stack := st.Stack
	awscdk.Tags_Of(stack).Add(s("app"), s("clockwork"), nil)
	awscdk.Tags_Of(stack).Add(s("stage"), s(cfg.Stage), nil)

	// State outlives the stack outside dev.
	sb := &stackBuilder{st: st, cfg: cfg, dirs: props.FunctionDirs, stateRemoval: awscdk.RemovalPolicy_DESTROY}
	if cfg.Retain() {
		sb.stateRemoval = awscdk.RemovalPolicy_RETAIN
	}
	sb.state()
	sb.clock()
	sb.stream()
	sb.grader()
	sb.apiFunctions()
	sb.httpAPI()

	// Alarms, who hears them, and the dashboard (observability.go).
	st.observe(cfg)
	st.addMetricRows(cfg) // the service's clockwork_ metrics (metrics.go)

	// Why the findings of cdk-nag the stack keeps are right (nag.go).
	st.suppressNagFindings()

	st.APIOutput = awscdk.NewCfnOutput(stack, s("ApiUrl"), &awscdk.CfnOutputProps{
		Value: st.HTTPStage.Url(), Description: s("Base URL of the HTTP API"),
	})
	st.TableOuput = awscdk.NewCfnOutput(stack, s("TableName"), &awscdk.CfnOutputProps{
		Value: st.Table.TableName(), Description: s("DynamoDB table (TABLE_NAME)"),
	})
	for _, o := range []struct{ id, desc, value string }{
		{"ApiId", "Id of the HTTP API", *st.HTTPAPI.ApiId()},
		{"ScheduleGroupName", "EventBridge Scheduler group (SCHEDULE_GROUP)", *st.ScheduleGroup.ScheduleGroupName()},
		{"ClockFunctionArn", "Scheduler target (CLOCK_FUNCTION_ARN)", *st.Clock.FunctionArn()},
		{"SchedulerRoleArn", "Role Scheduler assumes (SCHEDULER_ROLE_ARN)", *st.SchedulerRole.RoleArn()},
		{"SchedulerDlqArn", "Dead-letter queue of the Scheduler targets (SCHEDULER_DLQ_ARN)", *st.SchedulerDLQ.QueueArn()},
		{"SchedulerDlqUrl", "Dead-letter queue of the Scheduler targets (URL)", *st.SchedulerDLQ.QueueUrl()},
		{"StreamFailureQueueUrl", "On-failure destination of the stream mapping (URL)", *st.StreamFailureQueue.QueueUrl()},
		{"TimerQueueUrl", "Timer queue of the clock function (TIMER_QUEUE_URL)", *st.TimerQueue.QueueUrl()},
		{"TimerDlqUrl", "Dead-letter queue of the timer queue (URL)", *st.TimerDLQ.QueueUrl()},
		{"GradingQueueUrl", "Grading queue of the grader function (GRADING_QUEUE_URL)", *st.GradingQueue.QueueUrl()},
		{"GradingDlqUrl", "Dead-letter queue of the grading queue (URL)", *st.GradingDLQ.QueueUrl()},
		{"TokensParameterName", "SSM SecureString the authorizer reads the tokens from (TOKENS_PARAMETER)", cfg.TokensParameter},
		{"AlarmTopicArn", "SNS topic of the alarms", *st.AlarmTopic.TopicArn()},
	} {
		awscdk.NewCfnOutput(stack, s(o.id), &awscdk.CfnOutputProps{Value: s(o.value), Description: s(o.desc)})
	}
	return st
}

// reserve sets a function's reserved concurrency (0: unreserved).
func reserve(p *awslambda.FunctionProps, concurrency int) {
	if concurrency > 0 {
		p.ReservedConcurrentExecutions = n(float64(concurrency))
	}
}

// throttlePublicRoutes gives each route that needs no token its own
// throttle, below the stage default: nothing else limits who calls them.
func (st *Stack) throttlePublicRoutes(cfg Config) {
	settings := map[string]interface{}{}
	for _, r := range Routes {
		if r.Public {
			settings[r.Method+" "+r.Path] = map[string]interface{}{
				"ThrottlingRateLimit": cfg.PublicThrottleRate, "ThrottlingBurstLimit": cfg.PublicThrottleBurst,
			}
		}
	}
	st.HTTPStage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetRouteSettings(settings)
}

// AccessLogFormat is the HTTP API access log line: JSON, one object per
// request, without headers or bodies.
const AccessLogFormat = `{"requestId":"$context.requestId","requestTime":"$context.requestTime","ip":"$context.identity.sourceIp",` +
	`"userAgent":"$context.identity.userAgent","httpMethod":"$context.httpMethod","routeKey":"$context.routeKey","path":"$context.path",` +
	`"status":"$context.status","protocol":"$context.protocol","responseLength":"$context.responseLength",` +
	`"responseLatency":"$context.responseLatency","integrationLatency":"$context.integrationLatency",` +
	`"integrationStatus":"$context.integrationStatus","integrationError":"$context.integrationErrorMessage","error":"$context.error.message"}`
