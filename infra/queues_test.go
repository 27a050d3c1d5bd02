package main

// The stack's queues, the stream and timer mappings, and their alarms.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/streamfilter"
	"github.com/aws/jsii-runtime-go"
)

func TestStreamMapping(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			assert(t, "three mappings", func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(3)) })
			assert(t, "mapping", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
					"EventSourceArn":             getAtt("Table", "StreamArn"),
					"FunctionName":               ref(fnID(t, tj, "stream", stage)),
					"StartingPosition":           "TRIM_HORIZON",
					"BatchSize":                  StreamBatchSize,
					"BisectBatchOnFunctionError": true,
					"MaximumRetryAttempts":       StreamRetryAttempts,
					"MaximumRecordAgeInSeconds":  StreamMaxRecordAgeHr * 3600,
					"FunctionResponseTypes":      arr{"ReportBatchItemFailures"},
					"DestinationConfig": obj{"OnFailure": obj{
						"Destination": getAtt(onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-stream-failures"), "Arn"),
					}},
				})
			})
			// Only the record types the stream function acts on invoke it:
			// puts and updates by their new image, deletes by their old.
			types := []any{}
			for _, ty := range streamfilter.RecordTypes {
				types = append(types, ty)
			}
			newImage, _ := json.Marshal(obj{"dynamodb": obj{"NewImage": obj{"type": obj{"S": types}}}})
			removed, _ := json.Marshal(obj{"eventName": arr{"REMOVE"}, "dynamodb": obj{"OldImage": obj{"type": obj{"S": types}}}})
			assert(t, "stream filter", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
					"EventSourceArn": getAtt("Table", "StreamArn"),
					"FilterCriteria": obj{"Filters": arr{obj{"Pattern": string(newImage)}, obj{"Pattern": string(removed)}}},
				})
			})
		})
	}
}

// TestTimerQueueAndSweep pins the precision design's resources: the timer
// queue (SSE, its DLQ after TimerMaxReceives receives, a visibility timeout
// six times the clock function's), consumed by the clock function in
// batches with partial batch failures; only the stream and clock functions
// may send to it; the sweep schedule invokes the clock function every
// minute with the input the clock handler takes for a sweep.
func TestTimerQueueAndSweep(t *testing.T) {
	if TimerMaxReceives != awsrt.TimerQueueMaxReceives {
		t.Errorf("TimerMaxReceives %d, the local AWS mode's %d", TimerMaxReceives, awsrt.TimerQueueMaxReceives)
	}
	var ev awsrt.SweepEvent
	if err := json.Unmarshal([]byte(SweepInput), &ev); err != nil || ev.Action != awsrt.SweepAction {
		t.Errorf("SweepInput %s is not the clock handler's sweep event (%v)", SweepInput, err)
	}
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			timers := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-timers")
			dlq := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-timers-dlq")
			clock := fnID(t, tj, "clock", stage)
			assert(t, "timer queue", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), obj{
					"QueueName": "clockwork-" + stage + "-timers", "SqsManagedSseEnabled": true, "VisibilityTimeout": TimerVisibilityS,
					"RedrivePolicy": obj{"deadLetterTargetArn": getAtt(dlq, "Arn"), "maxReceiveCount": TimerMaxReceives},
				})
			})
			assert(t, "clock consumes the timer queue", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
					"EventSourceArn": getAtt(timers, "Arn"), "FunctionName": ref(clock),
					"BatchSize": TimerBatchSize, "FunctionResponseTypes": arr{"ReportBatchItemFailures"},
				})
			})
			// The mapping's scaling stays below the clock's reservation,
			// which Scheduler's invocations and the sweep share (the
			// mapping does not account for reserved concurrency).
			mc := TimerQueueMaxConcurrency(sy.cfg.ClockConcurrency)
			if mc < 2 || mc >= sy.cfg.ClockConcurrency {
				t.Errorf("timer queue maximum concurrency %d for a clock reserving %d", mc, sy.cfg.ClockConcurrency)
			}
			assert(t, "the timer queue's mapping scales below the clock's reservation", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
					"EventSourceArn": getAtt(timers, "Arn"), "ScalingConfig": obj{"MaximumConcurrency": mc},
				})
			})
			for _, name := range Functions {
				acts := actionsOf(statementsOfRole(tj, roleOfFunction(t, tj, "clockwork-"+stage+"-"+name)))
				send := fmt.Sprint(acts["sqs:SendMessage"])
				want := name == "clock" || name == "stream"
				if got := strings.Contains(send, timers); got != want {
					t.Errorf("%s function may send to the timer queue: %v, want %v (%s)", name, got, want, send)
				}
				if consume := acts["sqs:ReceiveMessage"] != nil && acts["sqs:DeleteMessage"] != nil; consume != (name == "clock" || name == "grader") {
					t.Errorf("%s function consumes a queue: %v", name, consume)
				}
			}
			sid, sweep := only(t, tj, "AWS::Scheduler::Schedule", "Name", "clockwork-"+stage+"-sweep")
			gid, _ := only(t, tj, "AWS::Scheduler::ScheduleGroup", "Name", "clockwork-"+stage)
			if !slices.Contains(list(sweep["DependsOn"]), any(gid)) {
				t.Errorf("sweep schedule DependsOn %v, want its group %s", sweep["DependsOn"], gid)
			}
			schedRole := onlyID(t, tj, "AWS::IAM::Role", "Description", "Assumed by EventBridge Scheduler (clockwork-"+stage+" schedules) to invoke the clock function")
			assert(t, "sweep schedule "+sid, func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Scheduler::Schedule"), obj{
					"Name": "clockwork-" + stage + "-sweep", "GroupName": "clockwork-" + stage, "ScheduleExpression": SweepExpression,
					"FlexibleTimeWindow": obj{"Mode": "OFF"}, "State": "ENABLED",
					"Target": obj{
						"Arn": getAtt(clock, "Arn"), "RoleArn": getAtt(schedRole, "Arn"), "Input": SweepInput,
						"RetryPolicy": obj{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": SweepMaxEventAgeS},
					},
				})
			})
		})
	}
}

// TestGradingQueue pins the grading queue (internal/awsrt, grading.go):
// SSE, its DLQ after GradingMaxReceives receives, a visibility timeout six
// times the grader's; consumed by the grader function alone, in batches
// with partial batch failures, its mapping's maximum concurrency the
// grader's reservation; sent to by the stream (VERIFY's jobs), the clock
// (the sweep's repair) and the grader (a failed attempt put back) only;
// the same settings as the local AWS mode's queue.
func TestGradingQueue(t *testing.T) {
	if GradingMaxReceives != awsrt.GradingMaxReceives || GraderTimeoutS != awsrt.GraderTimeoutS || GradingVisibilityS != awsrt.GradingVisibilityS {
		t.Errorf("grading queue settings %d/%d/%d, the runtime's %d/%d/%d", GradingMaxReceives, GraderTimeoutS, GradingVisibilityS,
			awsrt.GradingMaxReceives, awsrt.GraderTimeoutS, awsrt.GradingVisibilityS)
	}
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			queue := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-grading")
			dlq := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-grading-dlq")
			grader := fnID(t, tj, "grader", stage)
			assert(t, "grading queue", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), obj{
					"QueueName": "clockwork-" + stage + "-grading", "SqsManagedSseEnabled": true, "VisibilityTimeout": GradingVisibilityS,
					"RedrivePolicy": obj{"deadLetterTargetArn": getAtt(dlq, "Arn"), "maxReceiveCount": GradingMaxReceives},
				})
			})
			if sy.cfg.GraderConcurrency < 2 {
				t.Fatalf("grader concurrency %d: a mapping's maximum concurrency is at least 2", sy.cfg.GraderConcurrency)
			}
			assert(t, "the grader consumes the grading queue, within its reservation", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
					"EventSourceArn": getAtt(queue, "Arn"), "FunctionName": ref(grader),
					"BatchSize": GradingBatchSize, "FunctionResponseTypes": arr{"ReportBatchItemFailures"},
					"ScalingConfig": obj{"MaximumConcurrency": sy.cfg.GraderConcurrency},
				})
			})
			assert(t, "grader function", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{
					"FunctionName": "clockwork-" + stage + "-grader", "Timeout": GraderTimeoutS,
					"ReservedConcurrentExecutions": sy.cfg.GraderConcurrency,
				})
			})
			for _, name := range Functions {
				acts := actionsOf(statementsOfRole(tj, roleOfFunction(t, tj, "clockwork-"+stage+"-"+name)))
				send := fmt.Sprint(acts["sqs:SendMessage"])
				// The api puts an evaluation's first step on it.
				want := name == "clock" || name == "stream" || name == "grader" || name == "api"
				if got := strings.Contains(send, queue); got != want {
					t.Errorf("%s function may send to the grading queue: %v, want %v (%s)", name, got, want, send)
				}
				if got := strings.Contains(fmt.Sprint(acts["sqs:ReceiveMessage"]), queue); got != (name == "grader") {
					t.Errorf("%s function may receive from the grading queue: %v", name, got)
				}
			}
			assert(t, "grading DLQ alarm", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj{"AlarmName": "clockwork-" + stage + "-grading-dlq-depth"})
			})
		})
	}
}

func TestQueuesAndAlarms(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			assert(t, "six queues", func() { tmpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(6)) })
			assert(t, "queues", func() {
				tmpl.AllResourcesProperties(jsii.String("AWS::SQS::Queue"), obj{"SqsManagedSseEnabled": true})
			})
			// A dead letter is kept from when it entered its source queue:
			// every dead-letter queue outlives its source by days.
			for name, days := range map[string]int{"timers": SourceRetentionDays, "grading": SourceRetentionDays,
				"timers-dlq": DLQRetentionDays, "grading-dlq": DLQRetentionDays, "scheduler-dlq": DLQRetentionDays, "stream-failures": DLQRetentionDays} {
				_, q := only(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-"+name)
				if got, ok := props(q)["MessageRetentionPeriod"].(float64); !ok || got != float64(days*24*3600) {
					t.Errorf("queue %s keeps messages %v s, want %d days", name, got, days)
				}
			}
			if DLQRetentionDays-SourceRetentionDays < 7 {
				t.Errorf("dead-letter queues keep messages %d days, their sources %d", DLQRetentionDays, SourceRetentionDays)
			}
			// Outside dev the queues (instants, dead letters) outlive the stack.
			policy := "Delete"
			if stage != "dev" {
				policy = "Retain"
			}
			for id, q := range resources(tj, "AWS::SQS::Queue") {
				if q["DeletionPolicy"] != policy || q["UpdateReplacePolicy"] != policy {
					t.Errorf("queue %s DeletionPolicy/UpdateReplacePolicy = %v/%v, want %s", id, q["DeletionPolicy"], q["UpdateReplacePolicy"], policy)
				}
			}
			topic, _ := only(t, tj, "AWS::SNS::Topic", "TopicName", "clockwork-"+stage+"-alarms")
			assert(t, "every alarm notifies the topic", func() {
				tmpl.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), obj{
					"AlarmActions": arr{ref(topic)}, "TreatMissingData": "notBreaching",
				})
			})
			type want struct {
				ns, metric, dimName string
				dim                 any
				stat                string
				threshold           float64
			}
			var wants []want
			for _, q := range []string{"scheduler-dlq", "stream-failures", "timers-dlq"} {
				id := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-"+q)
				wants = append(wants, want{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", getAtt(id, "QueueName"), "Maximum", 1})
			}
			for _, name := range Functions {
				wants = append(wants, want{"AWS/Lambda", "Errors", "FunctionName", ref(fnID(t, tj, name, stage)), "Sum", 1})
			}
			wants = append(wants, want{"AWS/Lambda", "IteratorAge", "FunctionName", ref(fnID(t, tj, "stream", stage)), "Maximum", 60000})
			wants = append(wants, want{"AWS/Lambda", "DestinationDeliveryFailures", "FunctionName", ref(fnID(t, tj, "stream", stage)), "Sum", 1})
			for _, q := range []string{"timers", "grading"} {
				id := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-"+q)
				wants = append(wants, want{"AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", getAtt(id, "QueueName"), "Maximum", QueueOldestMessageAlarmS})
			}
			for _, name := range []string{"lapse-tasks-dead", "sweep-skipped", "effects-repaired"} {
				assert(t, "alarm "+name, func() {
					tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj{"AlarmName": "clockwork-" + stage + "-" + name, "Threshold": 1})
				})
			}
			for _, w := range wants {
				assert(t, fmt.Sprintf("alarm %s %s on %v", w.ns, w.metric, w.dim), func() {
					tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj{
						"Namespace": w.ns, "MetricName": w.metric, "Statistic": w.stat, "Threshold": w.threshold,
						"ComparisonOperator": "GreaterThanOrEqualToThreshold",
						"Dimensions":         arr{obj{"Name": w.dimName, "Value": w.dim}},
					})
				})
			}
		})
	}
}
