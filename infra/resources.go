package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/streamfilter"
)

// stackBuilder holds what NewStack's parts share while they add the
// stack's resources, in the order NewStack calls them (state, clock,
// stream, apiFunctions, httpAPI): each part reads what the ones before it
// set on st.
type stackBuilder struct {
	st           *Stack
	cfg          Config
	dirs         map[string]string // FunctionDirs
	stateRemoval awscdk.RemovalPolicy
	arch         awslambda.Architecture
	// tableEnv holds the settings of the functions that run the service
	// on the table.
	tableEnv map[string]string
}

// state adds what holds the service's state: the table, the queues, the
// schedule group and the credentials key; and the functions' settings.
func (sb *stackBuilder) state() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg
	stateRemoval := sb.stateRemoval

	// The table: the single-table design of the README (pk/sk and the sparse
	// GSIs gsiN on gsiN_pk/gsiN_sk, projecting KEYS_ONLY, as the DynamoDB adapter
	// checks). TTL on expiresAt: retention (RETAIN_EXPECTATIONS,
	// RETAIN_EVIDENCE) sets it on every item of a final record.
	st.Table = awsdynamodb.NewTable(stack, s("Table"), &awsdynamodb.TableProps{
		TableName:           s(cfg.Name),
		PartitionKey:        &awsdynamodb.Attribute{Name: s("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: s("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:              awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		TimeToLiveAttribute: s("expiresAt"),
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

	// The grading queue: one job per HEURISTIC criterion waiting for the
	// model judge, consumed by the grader function; what it fails
	// GradingMaxReceives times waits in the grading DLQ (the sweep puts the
	// job back).
	st.GradingDLQ = queue("GradingDlq", "grading-dlq")
	st.GradingQueue = queue("GradingQueue", "grading", func(p *awssqs.QueueProps) {
		p.VisibilityTimeout = awscdk.Duration_Seconds(n(GradingVisibilityS))
		p.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: st.GradingDLQ, MaxReceiveCount: n(GradingMaxReceives)}
	})

	// The schedule group holds one one-time schedule per instant.
	st.ScheduleGroup = awsscheduler.NewScheduleGroup(stack, s("ScheduleGroup"), &awsscheduler.ScheduleGroupProps{
		ScheduleGroupName: s(cfg.Name),
		RemovalPolicy:     stateRemoval,
	})
	st.CredentialsKey = awskms.NewKey(stack, s("CredentialsKey"), &awskms.KeyProps{
		Description:       s("Seals the credentials " + cfg.Name + " presents to agents (CREDENTIALS_KEY_ID)"),
		EnableKeyRotation: b(true),
		RemovalPolicy:     stateRemoval,
	})
	sb.arch = awslambda.Architecture_ARM_64()
	if cfg.Arch == "x86_64" {
		sb.arch = awslambda.Architecture_X86_64()
	}
	// The settings of the functions that run the service on the table.
	sb.tableEnv = map[string]string{
		"TABLE_NAME":           cfg.Name,
		"ALLOW_PRIVATE_AGENTS": strconv.FormatBool(cfg.AllowPrivateAgents),
		"CREDENTIALS_KEY_ID":   *st.CredentialsKey.KeyArn(),
		"METRICS_NAMESPACE":    MetricsNamespace(cfg),
		"RETAIN_EXPECTATIONS":  cfg.RetainExpectations,
		"RETAIN_EVIDENCE":      cfg.RetainEvidence,
	}
}

// logGroup adds a log group kept for the configured retention.
func (sb *stackBuilder) logGroup(id string) awslogs.LogGroup {
	return awslogs.NewLogGroup(sb.st.Stack, s(id), &awslogs.LogGroupProps{
		Retention:     retention(sb.cfg.LogRetentionDays),
		RemovalPolicy: sb.stateRemoval,
	})
}

// function builds one function with its own role and log group and
// STAGE; a function with table access (api, clock, stream; not the
// authorizer, which reads nothing but the tokens) also gets the table's
// settings and item actions.
func (sb *stackBuilder) function(id, name, desc string, timeout float64, tableAccess bool, env map[string]string, extra func(*awslambda.FunctionProps)) awslambda.Function {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg
	dir, ok := sb.dirs[name]
	if !ok {
		panic(fmt.Sprintf("no build of function %s", name))
	}
	vars := map[string]*string{"STAGE": s(cfg.Stage)}
	if tableAccess {
		for k, v := range sb.tableEnv {
			vars[k] = s(v)
		}
	}
	for k, v := range env {
		vars[k] = s(v)
	}
	// An explicit role instead of the AWSLambdaBasicExecutionRole
	// managed policy (logs on every log group): this function's log
	// group only.
	logs := sb.logGroup(id + "Logs")
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
		Architecture:  sb.arch,
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

// clock adds the clock function, the role Scheduler assumes to invoke it,
// its timer-queue mapping and the sweep schedule.
func (sb *stackBuilder) clock() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

	// The clock function: the Scheduler target, invoked asynchronously with
	// one instant. Reserved concurrency bounds the burst when many instants
	// fall due together (it protects the table and the account's other
	// functions); throttled events wait in Lambda's async queue.
	st.Clock = sb.function("ClockFunction", "clock", "Evaluates instants: Scheduler target, timer queue consumer and sweep",
		ClockTimeoutS, true, map[string]string{"TIMER_QUEUE_URL": *st.TimerQueue.QueueUrl(), "GRADING_QUEUE_URL": *st.GradingQueue.QueueUrl()}, func(p *awslambda.FunctionProps) {
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
	timerMapping := &awslambda.EventSourceMappingOptions{
		EventSourceArn:          st.TimerQueue.QueueArn(),
		BatchSize:               n(TimerBatchSize),
		ReportBatchItemFailures: b(true),
	}
	if mc := TimerQueueMaxConcurrency(cfg.ClockConcurrency); mc > 0 {
		timerMapping.MaxConcurrency = n(float64(mc))
	}
	st.Clock.AddEventSourceMapping(s("SqsEventSource:"+*awscdk.Names_NodeUniqueId(st.TimerQueue.Node())), timerMapping)
	st.Clock.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("TimerQueueConsume"), Actions: strs("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
		Resources: &[]*string{st.TimerQueue.QueueArn()},
	}))
	st.Clock.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("TimerQueueRearm"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.TimerQueue.QueueArn()},
	}))
	// The sweep also puts grading jobs that are late back on their queue.
	st.Clock.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("GradingQueueRepair"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.GradingQueue.QueueArn()},
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
}

// stream adds the stream function, its judge settings, its grants and the
// stream mapping.
func (sb *stackBuilder) stream() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

	schedulesArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: s("scheduler"), Resource: s("schedule"), ResourceName: s(cfg.Name + "/*"),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	// The stream function: consumes the table's stream, creates and deletes
	// the schedules of the group (passing the scheduler role to Scheduler),
	// delivers lapse tasks and runs VERIFY.
	st.Stream = sb.function("StreamFunction", "stream", "DynamoDB Streams consumer: schedules instants, delivers lapse tasks, runs VERIFY (model grading: the grader)",
		StreamTimeoutS, true, map[string]string{
			"SCHEDULE_GROUP":     cfg.Name,
			"CLOCK_FUNCTION_ARN": *st.Clock.FunctionArn(),
			"SCHEDULER_ROLE_ARN": *st.SchedulerRole.RoleArn(),
			"SCHEDULER_DLQ_ARN":  *st.SchedulerDLQ.QueueArn(),
			"TIMER_QUEUE_URL":    *st.TimerQueue.QueueUrl(),
		}, func(p *awslambda.FunctionProps) { reserve(p, cfg.StreamConcurrency) })
	st.Stream.Node().AddDependency(st.ScheduleGroup)
	// VERIFY (here) leaves HEURISTIC criteria to the grader function: it
	// puts their jobs on the grading queue, and holds no judge.
	st.Stream.AddEnvironment(s("GRADING_QUEUE_URL"), st.GradingQueue.QueueUrl(), nil)
	if cfg.JudgeKind != "" {
		st.Stream.AddEnvironment(s("MODEL_GRADING"), s("true"), nil)
	}
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("GradingQueue"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.GradingQueue.QueueArn()},
	}))
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
		// Only the records the function acts on invoke it (lookup entries,
		// guards and the other items' records are most of the stream):
		// puts and updates by their new image's type, deletes by their old.
		Filters: &[]*map[string]interface{}{
			awslambda.FilterCriteria_Filter(&map[string]interface{}{
				"dynamodb": map[string]interface{}{"NewImage": map[string]interface{}{"type": map[string]interface{}{"S": streamTypes()}}},
			}),
			awslambda.FilterCriteria_Filter(&map[string]interface{}{
				"eventName": []interface{}{"REMOVE"},
				"dynamodb":  map[string]interface{}{"OldImage": map[string]interface{}{"type": map[string]interface{}{"S": streamTypes()}}},
			}),
		},
	})
	st.Table.GrantStreamRead(st.Stream)
	esm.Node().DefaultChild().(awslambda.CfnEventSourceMapping).SetDestinationConfig(&awslambda.CfnEventSourceMapping_DestinationConfigProperty{
		OnFailure: &awslambda.CfnEventSourceMapping_OnFailureProperty{Destination: st.StreamFailureQueue.QueueArn()},
	})
	st.Stream.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("StreamFailures"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.StreamFailureQueue.QueueArn()},
	}))
}

// grader adds the grader function (the model judge's only caller: its
// settings and grants are here alone), its grading-queue mapping and
// grants.
func (sb *stackBuilder) grader() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg
	st.Grader = sb.function("GraderFunction", "grader", "Grades HEURISTIC criteria with the model judge, one grading-queue job at a time",
		GraderTimeoutS, true, map[string]string{"GRADING_QUEUE_URL": *st.GradingQueue.QueueUrl()}, func(p *awslambda.FunctionProps) {
			reserve(p, cfg.GraderConcurrency)
		})
	switch cfg.JudgeKind {
	case "bedrock":
		st.Grader.AddEnvironment(s("JUDGE_KIND"), s("bedrock"), nil)
		st.Grader.AddEnvironment(s("JUDGE_MODEL"), s(cfg.JudgeModel), nil)
		st.Grader.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("JudgeModel"), Actions: strs("bedrock:InvokeModel"),
			Resources: &[]*string{s(cfg.BedrockModelARN(*stack.Partition(), *stack.Region()))},
		}))
	case "openai":
		st.Grader.AddEnvironment(s("JUDGE_KIND"), s("openai"), nil)
		st.Grader.AddEnvironment(s("JUDGE_MODEL"), s(cfg.JudgeModel), nil)
		st.Grader.AddEnvironment(s("JUDGE_URL"), s(cfg.JudgeURL), nil)
		if cfg.JudgeAPIKeyParameter != "" {
			st.Grader.AddEnvironment(s("JUDGE_API_KEY_PARAMETER"), s(cfg.JudgeAPIKeyParameter), nil)
			st.Grader.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("JudgeAPIKey"), Actions: strs("ssm:GetParameter"),
				Resources: &[]*string{stack.FormatArn(&awscdk.ArnComponents{
					Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.JudgeAPIKeyParameter, "/")),
					ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
				})},
			}))
		}
	}
	// Its only trigger: the mapping's maximum concurrency is the
	// function's reservation, so the mapping's batches are never
	// throttled back to the queue.
	mapping := &awslambda.EventSourceMappingOptions{
		EventSourceArn:          st.GradingQueue.QueueArn(),
		BatchSize:               n(GradingBatchSize),
		ReportBatchItemFailures: b(true),
	}
	mapping.MaxConcurrency = n(float64(cfg.GraderConcurrency)) // at least 2: Config.Check
	st.Grader.AddEventSourceMapping(s("SqsEventSource:"+*awscdk.Names_NodeUniqueId(st.GradingQueue.Node())), mapping)
	st.Grader.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("GradingQueueConsume"), Actions: strs("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
		Resources: &[]*string{st.GradingQueue.QueueArn()},
	}))
	st.Grader.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("GradingQueueRetry"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.GradingQueue.QueueArn()},
	}))
}

// streamTypes are streamfilter.RecordTypes as a filter pattern's values.
func streamTypes() []interface{} {
	out := make([]interface{}, len(streamfilter.RecordTypes))
	for i, t := range streamfilter.RecordTypes {
		out[i] = t
	}
	return out
}

// apiFunctions adds the authorizer and API functions, and the grants of
// the signing key and the credentials key.
func (sb *stackBuilder) apiFunctions() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

	// The authorizer function authenticates bearer tokens against the
	// hashed tokens in SSM (SecureString, created by the operator; the AWS
	// managed key aws/ssm needs no extra grant). It is the only function
	// that reads them; the API function trusts its answer.
	tokensArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.TokensParameter, "/")),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	st.Authorizer = sb.function("AuthorizerFunction", "authorizer", "HTTP API Lambda authorizer: authenticates bearer tokens against the hashed tokens in SSM",
		AuthorizerTimeoutS, false, map[string]string{"TOKENS_PARAMETER": cfg.TokensParameter}, func(p *awslambda.FunctionProps) { reserve(p, cfg.AuthorizerConcurrency) })
	st.Authorizer.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("ReadTokens"), Actions: strs("ssm:GetParameter"), Resources: &[]*string{tokensArn},
	}))
	st.API = sb.function("ApiFunction", "api", "HTTP API (API Gateway payload v2): agents, expectations, facts, anticipations, verifications",
		APITimeoutS, true, map[string]string{"TRUST_AUTHORIZER": "true"}, func(p *awslambda.FunctionProps) { reserve(p, cfg.APIConcurrency) })
	if cfg.MCPAllowedOrigins != "" {
		st.API.AddEnvironment(s("MCP_ALLOWED_ORIGINS"), s(cfg.MCPAllowedOrigins), nil)
	}
	// The OTLP receiver: a function of its own, since the protobuf runtime
	// it links does not fit in the API function's bootstrap.
	st.Ingest = sb.function("IngestFunction", "ingest", "OTLP/HTTP traces receiver (POST /v1/traces): an instrumented agent's spans become its plans' execution events",
		APITimeoutS, true, map[string]string{"TRUST_AUTHORIZER": "true"}, func(p *awslambda.FunctionProps) { reserve(p, cfg.IngestConcurrency) })

	// The VERIFY signing key, when configured: every function that starts
	// the runtime (api, clock, stream) reads it at start.
	if cfg.SigningKeyParameter != "" {
		keyArn := stack.FormatArn(&awscdk.ArnComponents{
			Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.SigningKeyParameter, "/")),
			ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		})
		for _, fn := range []awslambda.Function{st.API, st.Clock, st.Stream, st.Grader, st.Ingest} {
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
	sb.alerts()
}

// alerts grants what sending alert notifications needs: the clock function
// attempts them (timer-queue messages, the sweep), the API function sends
// a channel's test. Both open channel secrets (the API only those: the
// encryption context names the channel agent), and may send with SES from
// the configured identity and put events on the configured buses.
func (sb *stackBuilder) alerts() {
	st, cfg, stack := sb.st, sb.cfg, sb.st.Stack
	st.API.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("OpenChannelSecrets"), Actions: strs("kms:Decrypt"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"kms:EncryptionContext:clockwork:agent": ChannelSealAgent},
		},
	}))
	notifying := []awslambda.Function{st.API, st.Clock}
	for _, fn := range notifying {
		if cfg.PublicURL != "" {
			fn.AddEnvironment(s("PUBLIC_URL"), s(cfg.PublicURL), nil)
		}
	}
	if cfg.SESFrom != "" {
		domain := cfg.SESFrom[strings.LastIndexByte(cfg.SESFrom, '@')+1:]
		var arns []*string
		for _, id := range []string{cfg.SESFrom, domain} {
			arns = append(arns, stack.FormatArn(&awscdk.ArnComponents{Service: s("ses"), Resource: s("identity"), ResourceName: s(id),
				ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME}))
		}
		for _, fn := range notifying {
			fn.AddEnvironment(s("SES_FROM"), s(cfg.SESFrom), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("SendAlertMail"), Actions: strs("ses:SendEmail"), Resources: &arns,
			}))
		}
	}
	if cfg.AlertEventBuses != "" {
		var arns []*string
		for _, b := range strings.Split(cfg.AlertEventBuses, ",") {
			arns = append(arns, stack.FormatArn(&awscdk.ArnComponents{Service: s("events"), Resource: s("event-bus"), ResourceName: s(b),
				ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME}))
		}
		for _, fn := range notifying {
			fn.AddEnvironment(s("EVENTBRIDGE_ALERTS"), s("true"), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("PutAlertEvents"), Actions: strs("events:PutEvents"), Resources: &arns,
			}))
		}
	}
}

// ChannelSealAgent is the agent under which internal/notify seals channel
// secrets (the KMS encryption context's clockwork:agent).
const ChannelSealAgent = "clockwork:channel"

// httpAPI adds the HTTP API: its stage, authorizers and routes.
func (sb *stackBuilder) httpAPI() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

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
	accessLogs := sb.logGroup("HttpApiAccessLogs")
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
	ingest := awsapigatewayv2integrations.NewHttpLambdaIntegration(s("IngestIntegration"), st.Ingest, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
		PayloadFormatVersion:   awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		ScopePermissionToRoute: b(false),
	})
	for _, r := range Routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path: s(r.Path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)}, Integration: integration,
		}
		if r.Method+" "+r.Path == TracesRoute {
			opts.Integration = ingest
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
}
