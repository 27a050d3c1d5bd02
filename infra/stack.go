package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
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

	"github.com/agentclock/clockwork/internal/store"
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
	{"POST", "/v1/agents/{agentId}/expectations", false},
	{"GET", "/v1/agents/{agentId}/expectations", false},
	{"GET", "/v1/agents/{agentId}/expectations/{expectationId}", false},
	{"POST", "/v1/agents/{agentId}/expectations/{expectationId}/redeliver", false},
	{"POST", "/v1/agents/{agentId}/facts", false},
	{"POST", "/v1/agents/{agentId}/withdrawals", false},
	{"POST", "/v1/agents/{agentId}/a2a", false},
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
	{"POST", "/mcp", false}, // the MCP endpoint (internal/mcpapi): tools for LLM agents
	// The web console: its page and files are public (no authorizer); its
	// data comes through the routes above with the token the person enters.
	{"GET", "/console", true},
	{"GET", "/console/{asset}", true},
	{"GET", "/v1/agents", false},
	{"GET", "/v1/agents/{agentId}/anticipations", false},
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
)

// Function settings: memory (MB) and timeout (s).
const (
	FunctionMemoryMB   = 256
	AuthorizerTimeoutS = 5   // API Gateway waits at most 10 s for an authorizer
	APITimeoutS        = 25  // under API Gateway's 30 s integration limit
	ClockTimeoutS      = 30  // one instant: a read and a conditional write
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
// everything; the clock reads records and writes them whole (no lookups:
// it decides on the record it re-reads) and queries the open-instant index
// in the sweep; the stream reads lookup entries and records and writes
// them whole, and reads no index.
var (
	TableActionsOf = map[string][]string{
		"api":    TableActions,
		"clock":  {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"},
		"stream": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"},
	}
	IndexQueries = map[string]bool{"api": true, "clock": true}
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
	SweepInput        = `{"action":"sweep"}`
	SweepMaxEventAgeS = 60 // a sweep that cannot run within a minute is replaced by the next one
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
	Table                 awsdynamodb.Table
	API, Clock, Stream    awslambda.Function
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
	stateRemoval := awscdk.RemovalPolicy_DESTROY
	if cfg.Retain() {
		stateRemoval = awscdk.RemovalPolicy_RETAIN
	}

	// The table: the single-table design of the README (pk/sk and the sparse
	// GSIs gsiN on gsiN_pk/gsiN_sk, projecting KEYS_ONLY, as the DynamoDB adapter
	// checks). No TTL: nothing in the design expires.
	st.Table = awsdynamodb.NewTable(stack, s("Table"), &awsdynamodb.TableProps{
		TableName:    s(cfg.Name),
		PartitionKey: &awsdynamodb.Attribute{Name: s("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: s("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: b(true),
		},
		DeletionProtection: b(cfg.Retain()),
		RemovalPolicy:      stateRemoval,
	})
	for _, ix := range store.Indexes {
		name := string(ix)
		st.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      s(name),
			PartitionKey:   &awsdynamodb.Attribute{Name: s(name + "_pk"), Type: awsdynamodb.AttributeType_STRING},
			SortKey:        &awsdynamodb.Attribute{Name: s(name + "_sk"), Type: awsdynamodb.AttributeType_STRING},
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		})
	}
	// A fixed logical id (and a fixed name): a refactoring of the construct
	// tree can never make CloudFormation replace the table.
	st.Table.Node().DefaultChild().(awsdynamodb.CfnTable).OverrideLogicalId(s("Table"))

	// Dead letters. Scheduler's: schedules whose invocation of the clock
	// function failed after Scheduler's retries, and (as the function's own
	// dead-letter queue) instants whose asynchronous invocation failed after
	// Lambda's retries; every message is one instant, replayable as is.
	// The stream's: batches the stream function gave up on.
	queue := func(id, name string, extra ...func(*awssqs.QueueProps)) awssqs.Queue {
		p := &awssqs.QueueProps{
			QueueName:       s(cfg.Name + "-" + name),
			RetentionPeriod: awscdk.Duration_Days(n(14)),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      b(true),
			// Outside dev the queues outlive the stack: they hold
			// instants and dead letters.
			RemovalPolicy: stateRemoval,
		}
		for _, f := range extra {
			f(p)
		}
		return awssqs.NewQueue(stack, s(id), p)
	}
	st.SchedulerDLQ = queue("SchedulerDlq", "scheduler-dlq")
	st.StreamFailureQueue = queue("StreamFailureQueue", "stream-failures")
	// The timer queue: instants with a message timer (DelaySeconds, at
	// most 15 min), consumed by the clock function; what it fails
	// TimerMaxReceives times waits in the timer DLQ (the sweep processes
	// the instant anyway).
	st.TimerDLQ = queue("TimerDlq", "timers-dlq")
	st.TimerQueue = queue("TimerQueue", "timers", func(p *awssqs.QueueProps) {
		p.VisibilityTimeout = awscdk.Duration_Seconds(n(TimerVisibilityS))
		p.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: st.TimerDLQ, MaxReceiveCount: n(TimerMaxReceives)}
	})

	// The schedule group holds one one-time schedule per instant.
	st.ScheduleGroup = awsscheduler.NewScheduleGroup(stack, s("ScheduleGroup"), &awsscheduler.ScheduleGroupProps{
		ScheduleGroupName: s(cfg.Name),
		RemovalPolicy:     stateRemoval,
	})
	schedulesArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: s("scheduler"), Resource: s("schedule"), ResourceName: s(cfg.Name + "/*"),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})

	logGroup := func(id string) awslogs.LogGroup {
		return awslogs.NewLogGroup(stack, s(id), &awslogs.LogGroupProps{
			Retention:     retention(cfg.LogRetentionDays),
			RemovalPolicy: stateRemoval,
		})
	}
	st.CredentialsKey = awskms.NewKey(stack, s("CredentialsKey"), &awskms.KeyProps{
		Description:       s("Seals the credentials " + cfg.Name + " presents to agents (CREDENTIALS_KEY_ID)"),
		EnableKeyRotation: b(true),
		RemovalPolicy:     stateRemoval,
	})
	arch := awslambda.Architecture_ARM_64()
	if cfg.Arch == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	// The settings of the functions that run the service on the table.
	tableEnv := map[string]string{
		"TABLE_NAME":           cfg.Name,
		"ALLOW_PRIVATE_AGENTS": strconv.FormatBool(cfg.AllowPrivateAgents),
		"CREDENTIALS_KEY_ID":   *st.CredentialsKey.KeyArn(),
		"METRICS_NAMESPACE":    MetricsNamespace(cfg),
	}
	// function builds one function with its own role and log group and
	// STAGE; a function with table access (api, clock, stream; not the
	// authorizer, which reads nothing but the tokens) also gets the table's
	// settings and item actions.
	function := func(id, name, desc string, timeout float64, tableAccess bool, env map[string]string, extra func(*awslambda.FunctionProps)) awslambda.Function {
		dir, ok := props.FunctionDirs[name]
		if !ok {
			panic(fmt.Sprintf("no build of function %s", name))
		}
		vars := map[string]*string{"STAGE": s(cfg.Stage)}
		if tableAccess {
			for k, v := range tableEnv {
				vars[k] = s(v)
			}
		}
		for k, v := range env {
			vars[k] = s(v)
		}
		// An explicit role instead of the AWSLambdaBasicExecutionRole
		// managed policy (logs on every log group): this function's log
		// group only.
		logs := logGroup(id + "Logs")
		role := awsiam.NewRole(stack, s(id+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(s("lambda.amazonaws.com"), nil),
			Description: s("Execution role of " + cfg.Name + "-" + name),
		})
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("OwnLogs"), Actions: strs("logs:CreateLogStream", "logs:PutLogEvents"), Resources: &[]*string{logs.LogGroupArn()},
		}))
		p := &awslambda.FunctionProps{
			FunctionName:  s(cfg.Name + "-" + name),
			Description:   s(desc),
			Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
			Architecture:  arch,
			Handler:       s("bootstrap"),
			Code:          awslambda.Code_FromAsset(s(dir), nil),
			MemorySize:    n(FunctionMemoryMB),
			Timeout:       awscdk.Duration_Seconds(n(timeout)),
			Tracing:       awslambda.Tracing_ACTIVE,
			LogGroup:      logs,
			Role:          role,
			LoggingFormat: awslambda.LoggingFormat_JSON,
			Environment:   &vars,
		}
		if extra != nil {
			extra(p)
		}
		fn := awslambda.NewFunction(stack, s(id), p)
		if !tableAccess {
			return fn
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("TableItems"), Actions: strs(TableActionsOf[name]...), Resources: &[]*string{st.Table.TableArn()},
		}))
		if IndexQueries[name] {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("TableIndexQueries"), Actions: strs("dynamodb:Query"),
				Resources: &[]*string{awscdk.Fn_Join(s(""), &[]*string{st.Table.TableArn(), s("/index/*")})},
			}))
		}
		return fn
	}

	// The clock function: the Scheduler target, invoked asynchronously with
	// one instant. Reserved concurrency bounds the burst when many instants
	// fall due together (it protects the table and the account's other
	// functions); throttled events wait in Lambda's async queue.
	st.Clock = function("ClockFunction", "clock", "Evaluates instants: Scheduler target, timer queue consumer and sweep",
		ClockTimeoutS, true, map[string]string{"TIMER_QUEUE_URL": *st.TimerQueue.QueueUrl()}, func(p *awslambda.FunctionProps) {
			reserve(p, cfg.ClockConcurrency)
			p.DeadLetterQueue = st.SchedulerDLQ
			p.RetryAttempts = n(2)
			p.MaxEventAge = awscdk.Duration_Hours(n(6))
		})

	// The role Scheduler assumes to invoke the clock function and to
	// dead-letter what it could not deliver. Only this account's Scheduler
	// may assume it.
	st.SchedulerRole = awsiam.NewRole(stack, s("SchedulerRole"), &awsiam.RoleProps{
		Description: s("Assumed by EventBridge Scheduler (" + cfg.Name + " schedules) to invoke the clock function"),
		// Only this account's Scheduler, for schedules of this group
		// (confused deputy prevention: the group's ARN, as Scheduler's
		// guide asks, not a schedule's).
		AssumedBy: awsiam.NewServicePrincipal(s("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": stack.Account()},
				"ArnEquals":    map[string]interface{}{"aws:SourceArn": st.ScheduleGroup.ScheduleGroupArn()},
			},
		}),
	})
	st.SchedulerRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("InvokeClock"), Actions: strs("lambda:InvokeFunction"),
		Resources: &[]*string{st.Clock.FunctionArn(), awscdk.Fn_Join(s(""), &[]*string{st.Clock.FunctionArn(), s(":*")})},
	}))
	st.SchedulerRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("DeadLetter"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.SchedulerDLQ.QueueArn()},
	}))

	// The clock function consumes the timer queue (partial batch failures)
	// and puts early arrivals back on it.
	// The mapping is made as lambda-event-sources' SqsEventSource makes it
	// (same construct id, so the same logical id), but granted only what
	// Lambda's poller uses (its guide: ReceiveMessage, DeleteMessage,
	// GetQueueAttributes), not SqsEventSource's ChangeMessageVisibility and
	// GetQueueUrl (the IAM check, infra/iam_test.go).
	st.Clock.AddEventSourceMapping(s("SqsEventSource:"+*awscdk.Names_NodeUniqueId(st.TimerQueue.Node())), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          st.TimerQueue.QueueArn(),
		BatchSize:               n(TimerBatchSize),
		ReportBatchItemFailures: b(true),
	})
	st.Clock.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("TimerQueueConsume"), Actions: strs("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
		Resources: &[]*string{st.TimerQueue.QueueArn()},
	}))
	st.Clock.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("TimerQueueRearm"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.TimerQueue.QueueArn()},
	}))
	// The sweep: every minute, the clock function processes what is past
	// due and that nothing processed (a dead-lettered fire or message).
	st.SweepSchedule = awsscheduler.NewCfnSchedule(stack, s("SweepSchedule"), &awsscheduler.CfnScheduleProps{
		Name:               s(cfg.Name + "-sweep"),
		GroupName:          st.ScheduleGroup.ScheduleGroupName(),
		Description:        s("Safety net: processes instants and deliveries past due that nothing processed"),
		ScheduleExpression: s(SweepExpression),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: s("OFF")},
		State:              s("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     st.Clock.FunctionArn(),
			RoleArn: st.SchedulerRole.RoleArn(),
			Input:   s(SweepInput),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts: n(0), MaximumEventAgeInSeconds: n(SweepMaxEventAgeS),
			},
		},
	})
	st.SweepSchedule.Node().AddDependency(st.ScheduleGroup)

	// The stream function: consumes the table's stream, creates and deletes
	// the schedules of the group (passing the scheduler role to Scheduler),
	// delivers lapse tasks and runs VERIFY.
	st.Stream = function("StreamFunction", "stream", "DynamoDB Streams consumer: schedules instants, delivers lapse tasks, runs VERIFY",
		StreamTimeoutS, true, map[string]string{
			"SCHEDULE_GROUP":     cfg.Name,
			"CLOCK_FUNCTION_ARN": *st.Clock.FunctionArn(),
			"SCHEDULER_ROLE_ARN": *st.SchedulerRole.RoleArn(),
			"SCHEDULER_DLQ_ARN":  *st.SchedulerDLQ.QueueArn(),
			"TIMER_QUEUE_URL":    *st.TimerQueue.QueueUrl(),
		}, func(p *awslambda.FunctionProps) { reserve(p, cfg.StreamConcurrency) })
	st.Stream.Node().AddDependency(st.ScheduleGroup)
	// The model judge runs in VERIFY, in the stream function only: it alone
	// gets the judge's settings and its grants, and only when configured.
	switch cfg.JudgeKind {
	case "bedrock":
		st.Stream.AddEnvironment(s("JUDGE_KIND"), s("bedrock"), nil)
		st.Stream.AddEnvironment(s("JUDGE_MODEL"), s(cfg.JudgeModel), nil)
		st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("JudgeModel"), Actions: strs("bedrock:InvokeModel"),
			Resources: &[]*string{s(cfg.BedrockModelARN(*stack.Partition(), *stack.Region()))},
		}))
	case "openai":
		st.Stream.AddEnvironment(s("JUDGE_KIND"), s("openai"), nil)
		st.Stream.AddEnvironment(s("JUDGE_MODEL"), s(cfg.JudgeModel), nil)
		st.Stream.AddEnvironment(s("JUDGE_URL"), s(cfg.JudgeURL), nil)
		if cfg.JudgeAPIKeyParameter != "" {
			st.Stream.AddEnvironment(s("JUDGE_API_KEY_PARAMETER"), s(cfg.JudgeAPIKeyParameter), nil)
			st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("JudgeAPIKey"), Actions: strs("ssm:GetParameter"),
				Resources: &[]*string{stack.FormatArn(&awscdk.ArnComponents{
					Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.JudgeAPIKeyParameter, "/")),
					ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
				})},
			}))
		}
	}
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("Schedules"), Actions: strs(SchedulerActions...), Resources: &[]*string{schedulesArn},
	}))
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("TimerQueue"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.TimerQueue.QueueArn()},
	}))
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("PassSchedulerRole"), Actions: strs("iam:PassRole"), Resources: &[]*string{st.SchedulerRole.RoleArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"iam:PassedToService": "scheduler.amazonaws.com"},
		},
	}))
	// As lambda-event-sources' DynamoEventSource makes it (same construct
	// id: the same logical id, so an update does not replace the mapping and
	// read the stream again from its oldest record), with its stream-read
	// grant, but the on-failure destination granted only sqs:SendMessage
	// (SqsDlq also grants GetQueueAttributes and GetQueueUrl, which Lambda
	// does not use).
	esm := st.Stream.AddEventSourceMapping(s("DynamoDBEventSource:"+*awscdk.Names_NodeUniqueId(st.Table.Node())), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          st.Table.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               n(StreamBatchSize),
		BisectBatchOnError:      b(true),
		RetryAttempts:           n(StreamRetryAttempts),
		MaxRecordAge:            awscdk.Duration_Hours(n(StreamMaxRecordAgeHr)),
		ReportBatchItemFailures: b(true),
		ParallelizationFactor:   n(1),
	})
	st.Table.GrantStreamRead(st.Stream)
	esm.Node().DefaultChild().(awslambda.CfnEventSourceMapping).SetDestinationConfig(&awslambda.CfnEventSourceMapping_DestinationConfigProperty{
		OnFailure: &awslambda.CfnEventSourceMapping_OnFailureProperty{Destination: st.StreamFailureQueue.QueueArn()},
	})
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("StreamFailures"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.StreamFailureQueue.QueueArn()},
	}))

	// The authorizer function authenticates bearer tokens against the
	// hashed tokens in SSM (SecureString, created by the operator; the AWS
	// managed key aws/ssm needs no extra grant). It is the only function
	// that reads them; the API function trusts its answer.
	tokensArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.TokensParameter, "/")),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	st.Authorizer = function("AuthorizerFunction", "authorizer", "HTTP API Lambda authorizer: authenticates bearer tokens against the hashed tokens in SSM",
		AuthorizerTimeoutS, false, map[string]string{"TOKENS_PARAMETER": cfg.TokensParameter}, func(p *awslambda.FunctionProps) { reserve(p, cfg.AuthorizerConcurrency) })
	st.Authorizer.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("ReadTokens"), Actions: strs("ssm:GetParameter"), Resources: &[]*string{tokensArn},
	}))
	st.API = function("ApiFunction", "api", "HTTP API (API Gateway payload v2): agents, expectations, facts, anticipations, verifications",
		APITimeoutS, true, map[string]string{"TRUST_AUTHORIZER": "true"}, func(p *awslambda.FunctionProps) { reserve(p, cfg.APIConcurrency) })

	// The VERIFY signing key, when configured: every function that starts
	// the runtime (api, clock, stream) reads it at start.
	if cfg.SigningKeyParameter != "" {
		keyArn := stack.FormatArn(&awscdk.ArnComponents{
			Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.SigningKeyParameter, "/")),
			ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		})
		for _, fn := range []awslambda.Function{st.API, st.Clock, st.Stream} {
			fn.AddEnvironment(s("SIGNING_KEY_PARAMETER"), s(cfg.SigningKeyParameter), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("ReadSigningKey"), Actions: strs("ssm:GetParameter"), Resources: &[]*string{keyArn},
			}))
		}
	}

	// Outbound credentials: the API function seals (a data key per secret),
	// only the functions that send lapse tasks open them.
	st.API.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("SealCredentials"), Actions: strs("kms:GenerateDataKey"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
	}))
	for _, fn := range []awslambda.Function{st.Stream, st.Clock} {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("OpenCredentials"), Actions: strs("kms:Decrypt"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
		}))
	}

	// The HTTP API: explicit routes, default-route throttling, JSON access
	// logs (no headers, so no bearer tokens, are logged).
	st.HTTPAPI = awsapigatewayv2.NewHttpApi(stack, s("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            s(cfg.Name),
		Description:        s("clockwork HTTP API (" + cfg.Stage + ")"),
		CreateDefaultStage: b(false),
	})
	st.HTTPStage = awsapigatewayv2.NewHttpStage(stack, s("HttpApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    st.HTTPAPI,
		StageName:  s("$default"),
		AutoDeploy: b(true),
		Throttle:   &awsapigatewayv2.ThrottleSettings{RateLimit: n(float64(cfg.ThrottleRate)), BurstLimit: n(float64(cfg.ThrottleBurst))},
	})
	accessLogs := logGroup("HttpApiAccessLogs")
	st.HTTPStage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         s(AccessLogFormat),
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(s("ApiIntegration"), st.API, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
		PayloadFormatVersion:   awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		ScopePermissionToRoute: b(false),
	})
	// A request without an Authorization header is answered 401, one the
	// authorizer refuses 403, both by API Gateway without invoking the API
	// function.
	authz := awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(s("TokenAuthorizer"), st.Authorizer, &awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
		AuthorizerName:  s(cfg.Name + "-tokens"),
		ResponseTypes:   &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
		IdentitySource:  strs("$request.header.Authorization"),
		ResultsCacheTtl: awscdk.Duration_Seconds(n(AuthorizerCacheTTLS)),
	})
	// The push route (where A2A pushes land) takes the A2A 0.3 push
	// sender's X-A2A-Notification-Token as well as Authorization. API
	// Gateway refuses a request that lacks any identity source listed, so
	// that route has its own authorizer (the same function) with none and
	// no cache: it is invoked on every push and reads the headers itself
	// (internal/authorizer). A push without either header is refused by it
	// with 403.
	pushAuthz := awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(s("PushAuthorizer"), st.Authorizer, &awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
		AuthorizerName:  s(cfg.Name + "-push-tokens"),
		ResponseTypes:   &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
		IdentitySource:  &[]*string{},
		ResultsCacheTtl: awscdk.Duration_Seconds(n(0)),
	})
	for _, r := range Routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path: s(r.Path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)}, Integration: integration,
		}
		switch {
		case r.Public:
		case r.Method+" "+r.Path == PushRoute:
			opts.Authorizer = pushAuthz
		default:
			opts.Authorizer = authz
		}
		routes := st.HTTPAPI.AddRoutes(opts)
		if r.Public {
			// The stage's route settings name the route: it must exist first.
			for _, route := range *routes {
				st.HTTPStage.Node().AddDependency(route)
			}
		}
	}
	st.throttlePublicRoutes(cfg)

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
