package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
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
	// A dead-letter queue keeps a message for DLQRetentionDays from when
	// it entered its source queue (SQS keeps the enqueue time when it
	// moves a message), so sources keep theirs SourceRetentionDays: a
	// message that reaches a dead-letter queue late still waits there
	// ten days for someone to look.
	queue := func(id, name string, extra ...func(*awssqs.QueueProps)) awssqs.Queue {
		p := &awssqs.QueueProps{
			QueueName:       s(cfg.Name + "-" + name),
			RetentionPeriod: awscdk.Duration_Days(n(DLQRetentionDays)),
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
		p.RetentionPeriod = awscdk.Duration_Days(n(SourceRetentionDays))
		p.VisibilityTimeout = awscdk.Duration_Seconds(n(TimerVisibilityS))
		p.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: st.TimerDLQ, MaxReceiveCount: n(TimerMaxReceives)}
	})

	// The grading queue: one job per HEURISTIC criterion waiting for the
	// model judge, consumed by the grader function; what it fails
	// GradingMaxReceives times waits in the grading DLQ (the sweep puts the
	// job back).
	st.GradingDLQ = queue("GradingDlq", "grading-dlq")
	st.GradingQueue = queue("GradingQueue", "grading", func(p *awssqs.QueueProps) {
		p.RetentionPeriod = awscdk.Duration_Days(n(SourceRetentionDays))
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
		"FACT_LOOKBACK_MAX":    cfg.FactLookbackMax,
		"ZONEINFO":             ZoneinfoEnv,
		"DELIVERY_RETRY_FOR":   cfg.DeliveryRetryFor,
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
		// Two batches per shard at once: Lambda keeps each item's records
		// in order at any factor, and item order is all the processing
		// relies on (every effect is keyed by its item and idempotent).
		ParallelizationFactor: n(StreamParallelization),
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
