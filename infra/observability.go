package main

import (
	"fmt"

	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
)

// Alarm thresholds of the service's health (docs/operations.md, "Alarms
// and the dashboard", says why each).
const (
	// API5xxThreshold is how many 5xx answers of the HTTP API in five
	// minutes raise the alarm: the API answers 5xx only when a dependency
	// or the code fails (throttling is a 429), so a handful is already a
	// fault, while one alone may be a Lambda cold start that timed out.
	API5xxThreshold = 5
	// APILatencyP99Ms is the HTTP API's p99 latency (ms) that raises the
	// alarm when it holds for APILatencyPeriods five-minute periods: a
	// request is one or two DynamoDB round trips (tens of ms), cold starts
	// add about 100 ms, so 2 s for a quarter of an hour is an outage.
	APILatencyP99Ms   = 2000
	APILatencyPeriods = 3
	// QueueOldestMessageAlarmS is the age (s) of the oldest message of the
	// timer or grading queue that raises the alarm: a message is delayed
	// at most 15 minutes (SQS's limit; longer waits are chained), so one
	// twice as old means its consumer is failing or throttled.
	QueueOldestMessageAlarmS = 1800
)

// SchedulerAlarmMetrics are the EventBridge Scheduler metrics (namespace
// AWS/Scheduler, dimension ScheduleGroup) that mean an instant was not
// delivered to the clock function: dropped after the retry policy, or not
// even written to the dead-letter queue.
var SchedulerAlarmMetrics = map[string]string{
	"InvocationDroppedCount":                     "scheduler-dropped",
	"InvocationsFailedToBeSentToDeadLetterCount": "scheduler-dlq-failed",
}

// ClockAsyncAlarmMetrics are the Lambda asynchronous-invocation metrics of
// the clock function (Scheduler invokes it asynchronously) that mean an
// instant was lost between Lambda's queue and the function.
var ClockAsyncAlarmMetrics = []string{"DeadLetterErrors", "AsyncEventsDropped"}

// TableOperations are the DynamoDB operations whose ThrottledRequests and
// SystemErrors are alarmed on (the adapter's operations and the stream's
// GetRecords).
var TableOperations = []awsdynamodb.Operation{
	awsdynamodb.Operation_GET_ITEM, awsdynamodb.Operation_QUERY, awsdynamodb.Operation_PUT_ITEM,
	awsdynamodb.Operation_UPDATE_ITEM, awsdynamodb.Operation_DELETE_ITEM, awsdynamodb.Operation_TRANSACT_WRITE_ITEMS,
	awsdynamodb.Operation_GET_RECORDS,
}

// observe adds who hears the alarms (the topic, TLS only, and its e-mail
// subscription), the alarms, and the dashboard of the service's health.
func (st *Stack) observe(cfg Config) {
	stack := st.Stack
	st.AlarmTopic = awssns.NewTopic(stack, s("AlarmTopic"), &awssns.TopicProps{
		TopicName:  s(cfg.Name + "-alarms"),
		EnforceSSL: b(true),
	})
	if cfg.AlarmEmail != "" {
		st.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(s(cfg.AlarmEmail), nil))
	}
	st.addAlarms()
	st.addNotificationAlarm(cfg)
	st.newDashboard(cfg)
}

// alarm adds an alarm (threshold reached or passed, missing data is fine)
// that notifies the alarm topic.
func (st *Stack) alarm(id, name, desc string, metric awscloudwatch.IMetric, threshold, periods float64) awscloudwatch.Alarm {
	a := awscloudwatch.NewAlarm(st.Stack, s(id), &awscloudwatch.AlarmProps{
		AlarmName:          s(*st.StackName() + "-" + name),
		AlarmDescription:   s(desc),
		Metric:             metric,
		Threshold:          n(threshold),
		EvaluationPeriods:  n(periods),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	a.AddAlarmAction(awscloudwatchactions.NewSnsAction(st.AlarmTopic))
	st.Alarms = append(st.Alarms, a)
	return a
}

// functions returns the stack's functions with their names and ids.
func (st *Stack) functions() []struct {
	id, name string
	fn       awslambda.Function
} {
	return []struct {
		id, name string
		fn       awslambda.Function
	}{{"Api", "api", st.API}, {"Authorizer", "authorizer", st.Authorizer}, {"Clock", "clock", st.Clock}, {"Grader", "grader", st.Grader}, {"Ingest", "ingest", st.Ingest}, {"Stream", "stream", st.Stream}}
}

func (st *Stack) addAlarms() {
	fiveMin := awscdk.Duration_Minutes(n(5))
	oneMin := awscdk.Duration_Minutes(n(1))
	sum := &awscloudwatch.MetricOptions{Period: fiveMin, Statistic: s("Sum")}
	maxDepth := &awscloudwatch.MetricOptions{Period: fiveMin, Statistic: s("Maximum")}

	// Dead letters waiting.
	st.alarm("SchedulerDlqDepthAlarm", "scheduler-dlq-depth",
		"Instants that were not processed are waiting in the scheduler dead-letter queue: see docs/operations.md (Dead letters)",
		st.SchedulerDLQ.MetricApproximateNumberOfMessagesVisible(maxDepth), 1, 1)
	st.alarm("TimerDlqDepthAlarm", "timers-dlq-depth",
		"Timer messages the clock function failed 5 times are waiting in the timer dead-letter queue (the sweep processed their instants): see docs/operations.md (Dead letters)",
		st.TimerDLQ.MetricApproximateNumberOfMessagesVisible(maxDepth), 1, 1)
	st.alarm("GradingDlqDepthAlarm", "grading-dlq-depth",
		"Grading jobs the grader function failed 5 times are waiting in the grading dead-letter queue (the sweep puts their jobs back after 15 minutes): see docs/operations.md (Dead letters)",
		st.GradingDLQ.MetricApproximateNumberOfMessagesVisible(maxDepth), 1, 1)
	st.alarm("StreamFailureDepthAlarm", "stream-failures-depth",
		"Stream batches the stream function gave up on are waiting in the stream failure queue: see docs/operations.md (Dead letters)",
		st.StreamFailureQueue.MetricApproximateNumberOfMessagesVisible(maxDepth), 1, 1)

	// Every function: errors and throttles.
	for _, f := range st.functions() {
		st.alarm(f.id+"ErrorsAlarm", f.name+"-errors", "The "+f.name+" function failed (errors or timeouts) in the last 5 minutes",
			f.fn.MetricErrors(sum), 1, 1)
		st.alarm(f.id+"ThrottlesAlarm", f.name+"-throttles", throttleAdvice[f.name], f.fn.MetricThrottles(sum), 1, 1)
	}
	// Work that waits too long or dies without a dead-letter queue to
	// hold it.
	st.alarm("StreamDestinationFailuresAlarm", "stream-destination-failures",
		"The stream mapping could not send a discarded batch's record to the stream failure queue: a change's record is gone without trace (the sweep redoes its marked effects): see docs/operations.md (Dead letters and alarms)",
		st.Stream.Metric(s("DestinationDeliveryFailures"), sum), 1, 1)
	for _, q := range []struct {
		id, name string
		queue    awssqs.Queue
	}{{"TimerQueue", "timers", st.TimerQueue}, {"GradingQueue", "grading", st.GradingQueue}} {
		st.alarm(q.id+"OldestMessageAlarm", q.name+"-oldest-message",
			"A message has waited on the "+q.name+" queue over 30 minutes (its delay is at most 15): its consumer is failing or throttled: see docs/operations.md (Dead letters and alarms)",
			q.queue.MetricApproximateAgeOfOldestMessage(maxDepth), QueueOldestMessageAlarmS, 1)
	}
	st.alarm("StreamIteratorAgeAlarm", "stream-iterator-age",
		"The stream function is more than a minute behind the table's stream for 5 minutes: scheduling and lapse delivery are delayed",
		st.Stream.Metric(s("IteratorAge"), &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Maximum")}), 60_000, 5)

	// The clock's asynchronous invocations (from Scheduler): an event
	// dropped by Lambda, or one its dead-letter queue did not take, is an
	// instant only the sweep will process.
	for _, m := range ClockAsyncAlarmMetrics {
		st.alarm("Clock"+m+"Alarm", "clock-"+kebab(m),
			"The clock function's asynchronous invocations: "+m+" (an instant from Scheduler was not processed nor dead-lettered; the sweep processes it within about two minutes): see docs/operations.md (Alarms)",
			st.Clock.Metric(s(m), sum), 1, 1)
	}
	// Scheduler itself: an invocation dropped, or not dead-lettered.
	for _, m := range []string{"InvocationDroppedCount", "InvocationsFailedToBeSentToDeadLetterCount"} {
		st.alarm("Scheduler"+m+"Alarm", SchedulerAlarmMetrics[m],
			"EventBridge Scheduler "+m+" on the schedule group: an instant's fire was lost (the sweep processes it): see docs/operations.md (Alarms)",
			st.schedulerMetric(m, sum), 1, 1)
	}

	// The HTTP API: server errors and latency.
	st.alarm("Api5xxAlarm", "api-5xx",
		"The HTTP API answered 5xx to 5 or more requests in 5 minutes: see the api function's logs and errors",
		st.HTTPAPI.MetricServerError(sum), API5xxThreshold, 1)
	st.alarm("ApiLatencyAlarm", "api-latency-p99",
		"The HTTP API's p99 latency was 2 s or more for 15 minutes: see the api function's duration and the table's throttles",
		st.HTTPAPI.MetricLatency(&awscloudwatch.MetricOptions{Period: fiveMin, Statistic: s("p99")}), APILatencyP99Ms, APILatencyPeriods)

	// The table: throttled requests (a hot key or an index that cannot
	// keep up) and DynamoDB's own errors.
	st.alarm("TableThrottlesAlarm", "table-throttled-requests",
		"DynamoDB throttled requests on the table (a hot partition key or index): see docs/operations.md (rates per key)",
		st.Table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{Operations: &TableOperations, Period: fiveMin}), 1, 1)
	st.alarm("TableSystemErrorsAlarm", "table-system-errors",
		"DynamoDB answered 500 (system errors) on the table: the SDK retried them; many mean a regional problem",
		st.Table.MetricSystemErrorsForOperations(&awsdynamodb.SystemErrorsForOperationsMetricOptions{Operations: &TableOperations, Period: fiveMin}), 1, 1)
}

// NotificationChannelTypes are the channel types the dead-notifications
// alarm sums (internal/alert.Types; infra does not import the runtime).
var NotificationChannelTypes = []string{"webhook", "slack", "pagerduty", "email", "eventbridge", "otlp"}

// addNotificationAlarm alarms when alert notifications are dead-lettered:
// people were not told of a lapse or a failed VERIFY.
func (st *Stack) addNotificationAlarm(cfg Config) {
	using := map[string]awscloudwatch.IMetric{}
	expr := ""
	for i, t := range NotificationChannelTypes {
		id := fmt.Sprintf("m%d", i)
		using[id] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: s(MetricsNamespace(cfg)), MetricName: s(metrics.Notifications.Name), Statistic: s("Sum"),
			Period:        awscdk.Duration_Minutes(n(5)),
			DimensionsMap: &map[string]*string{"channel_type": s(t), "outcome": s("dead")},
		})
		if expr != "" {
			expr += " + "
		}
		expr += "FILL(" + id + ", 0)"
	}
	emf := func(d *metrics.Desc) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: s(MetricsNamespace(cfg)), MetricName: s(d.Name), Statistic: s("Sum"), Period: awscdk.Duration_Minutes(n(5)),
		})
	}
	st.alarm("LapseTasksDeadAlarm", "lapse-tasks-dead",
		"Lapse tasks were dead-lettered (the agent refused them for good, or stayed down for the whole retry window): GET /v1/deadletters, then POST .../redeliver (docs/operations.md, Deliveries and outages)",
		emf(metrics.DeadLetters), 1, 1)
	st.alarm("SweepSkippedAlarm", "sweep-skipped",
		"The sweep skipped records it could not process (left for the next run): see the clock function's logs (docs/operations.md, Dead letters and alarms)",
		emf(metrics.SweepSkipped), 1, 1)
	st.alarm("EffectsRepairedAlarm", "effects-repaired",
		"The sweep redid the effects (VERIFY, alerts, re-anchoring) of changes whose stream records were discarded or kept failing: see the stream function's errors and the stream failure queue",
		emf(metrics.EffectsRepaired), 1, 1)
	st.alarm("NotificationsDeadAlarm", "notifications-dead",
		"Alert notifications were dead-lettered: people were not told of a lapse or a failed VERIFY. See GET /v1/channels/{id}/deadletters (docs/alerts.md) and replay them",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: s(expr), UsingMetrics: &using, Period: awscdk.Duration_Minutes(n(5)), Label: s("dead notifications")}), 1, 1)
}

// throttleAdvice is what each function's throttles alarm says.
var throttleAdvice = map[string]string{
	"api":        "The api function hit its reserved concurrency: requests are refused with 429/503 (raise -c apiConcurrency and the stage throttle together)",
	"authorizer": "The authorizer function hit its reserved concurrency: requests are refused (raise -c authorizerConcurrency)",
	"clock":      "The clock function hit its reserved concurrency: instants are delayed (raise -c clockConcurrency)",
	"ingest":     "The ingest function hit its reserved concurrency: OTLP exports are refused with 429 and the exporters retry (raise IngestConcurrency)",
	"grader":     "The grader function was throttled: model grading of HEURISTIC criteria is delayed (its jobs wait in the grading queue)",
	"stream":     "The stream function was throttled: the account's unreserved concurrency is exhausted; the stream waits (it holds reserved concurrency, see docs/operations.md)",
}

// schedulerMetric is an EventBridge Scheduler metric of the stack's
// schedule group.
func (st *Stack) schedulerMetric(name string, opts *awscloudwatch.MetricOptions) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: s("AWS/Scheduler"), MetricName: s(name),
		DimensionsMap: &map[string]*string{"ScheduleGroup": st.ScheduleGroup.ScheduleGroupName()},
		Period:        opts.Period, Statistic: opts.Statistic,
	})
}

// kebab turns a metric name (DeadLetterErrors) into an alarm name part
// (dead-letter-errors).
func kebab(name string) string {
	var out []byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				out = append(out, '-')
			}
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}

// newDashboard builds the CloudWatch dashboard of the service's health
// (named like the stack): one row per part (the API, the functions, the
// clock's path from Scheduler, the table, the queues). More rows are added
// with AddDashboardRow.
func (st *Stack) newDashboard(cfg Config) {
	st.Dashboard = awscloudwatch.NewDashboard(st.Stack, s("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   s(cfg.Name),
		DefaultInterval: awscdk.Duration_Hours(n(3)),
	})
	oneMin := awscdk.Duration_Minutes(n(1))
	sum := &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Sum")}
	graph := func(title string, left []awscloudwatch.IMetric, right ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		p := &awscloudwatch.GraphWidgetProps{Title: s(title), Left: &left, Width: n(8), Height: n(6)}
		if len(right) > 0 {
			p.Right = &right
		}
		return awscloudwatch.NewGraphWidget(p)
	}
	pct := func(stat string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s(stat)}
	}

	st.AddDashboardRow(
		graph("API requests and errors", []awscloudwatch.IMetric{
			st.HTTPAPI.MetricCount(sum), st.HTTPAPI.MetricClientError(sum), st.HTTPAPI.MetricServerError(sum)}),
		graph("API latency (ms)", []awscloudwatch.IMetric{
			st.HTTPAPI.MetricLatency(pct("p50")), st.HTTPAPI.MetricLatency(pct("p99")), st.HTTPAPI.MetricIntegrationLatency(pct("p99"))}),
		st.alarmStatus(),
	)
	var invocations, errors, throttles, duration, concurrency []awscloudwatch.IMetric
	for _, f := range st.functions() {
		label := &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Sum"), Label: s(f.name)}
		invocations = append(invocations, f.fn.MetricInvocations(label))
		errors = append(errors, f.fn.MetricErrors(label))
		throttles = append(throttles, f.fn.MetricThrottles(label))
		duration = append(duration, f.fn.MetricDuration(&awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("p99"), Label: s(f.name + " p99")}))
		concurrency = append(concurrency, f.fn.Metric(s("ConcurrentExecutions"), &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Maximum"), Label: s(f.name)}))
	}
	st.AddDashboardRow(
		graph("Function invocations", invocations),
		graph("Function errors and throttles", errors, throttles...),
		graph("Function duration p99 (ms) and concurrency", duration, concurrency...),
	)
	var sched []awscloudwatch.IMetric
	for _, m := range []string{"InvocationAttemptCount", "TargetErrorCount", "InvocationThrottleCount", "InvocationDroppedCount", "InvocationsSentToDeadLetterCount"} {
		sched = append(sched, st.schedulerMetric(m, sum))
	}
	var async []awscloudwatch.IMetric
	for _, m := range append([]string{"AsyncEventsReceived"}, ClockAsyncAlarmMetrics...) {
		async = append(async, st.Clock.Metric(s(m), sum))
	}
	st.AddDashboardRow(
		graph("Scheduler (schedule group)", sched),
		graph("Clock asynchronous invocations", async,
			st.Clock.Metric(s("AsyncEventAge"), &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Maximum")})),
		graph("Stream iterator age (ms)", []awscloudwatch.IMetric{
			st.Stream.Metric(s("IteratorAge"), &awscloudwatch.MetricOptions{Period: oneMin, Statistic: s("Maximum")})}),
	)
	st.AddDashboardRow(
		graph("Table capacity consumed", []awscloudwatch.IMetric{
			st.Table.MetricConsumedWriteCapacityUnits(sum), st.Table.MetricConsumedReadCapacityUnits(sum)}),
		graph("Table throttled requests", []awscloudwatch.IMetric{
			st.Table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{Operations: &TableOperations, Period: oneMin})}),
		graph("Table system errors", []awscloudwatch.IMetric{
			st.Table.MetricSystemErrorsForOperations(&awsdynamodb.SystemErrorsForOperationsMetricOptions{Operations: &TableOperations, Period: oneMin})}),
	)
	st.AddDashboardRow(
		graph("Queues: timers in flight, dead letters", []awscloudwatch.IMetric{
			st.TimerQueue.MetricApproximateNumberOfMessagesVisible(pct("Maximum")),
			st.TimerQueue.MetricApproximateNumberOfMessagesNotVisible(pct("Maximum")),
			st.SchedulerDLQ.MetricApproximateNumberOfMessagesVisible(pct("Maximum")),
			st.TimerDLQ.MetricApproximateNumberOfMessagesVisible(pct("Maximum")),
			st.StreamFailureQueue.MetricApproximateNumberOfMessagesVisible(pct("Maximum")),
		}),
	)
}

// AddDashboardRow appends a row of widgets to the service's dashboard
// (widgets of 8 columns, 3 per row, keep the layout). Other parts of the
// stack (for example the service's own clockwork_ metrics) add theirs with
// it after NewStack built the dashboard.
func (st *Stack) AddDashboardRow(widgets ...awscloudwatch.IWidget) {
	st.Dashboard.AddWidgets(widgets...)
}

// alarmStatus shows the state of every alarm of the stack.
func (st *Stack) alarmStatus() awscloudwatch.IWidget {
	alarms := make([]interfacesawscloudwatch.IAlarmRef, len(st.Alarms))
	for i, a := range st.Alarms {
		alarms[i] = a
	}
	return awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title: s("Alarms"), Alarms: &alarms, Width: n(8), Height: n(6),
	})
}
