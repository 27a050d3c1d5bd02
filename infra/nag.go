package main

import (
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppressNagFindings records, on the resources themselves, why each
// finding of cdk-nag's AwsSolutions and Serverless packs that the stack
// keeps is right for it (TestCDKNag runs both packs and fails on any
// finding not suppressed here). The reasons are in docs/operations.md too.
func (st *Stack) suppressNagFindings() {
	suppress := func(c constructs.IConstruct, children bool, rule, reason string) {
		cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{{Id: s(rule), Reason: s(reason)}}, b(children))
	}
	// Wildcards in the roles: each is the narrowest the service allows, and
	// infra/iam_test.go holds every role to exactly the operations the
	// functions perform, so no grant goes unnoticed.
	for _, fn := range st.functions() {
		suppress(fn.fn.Role(), true, "AwsSolutions-IAM5",
			"Wildcards only where no narrower resource exists: the table's indexes (table/index/*, queried by the listings and the sweep), "+
				"the schedules of the stack's own group (schedule/<group>/*, one per instant, named at run time), X-Ray's PutTraceSegments/PutTelemetryRecords "+
				"and DynamoDB Streams' ListStreams (no resource-level permissions); infra/iam_test.go checks every grant against the operations the function performs")
	}
	suppress(st.SchedulerRole, true, "AwsSolutions-IAM5",
		"lambda:InvokeFunction on the clock function and its versions (<arn>:*), as Scheduler invokes a qualified or unqualified ARN; nothing else")
	// The routes that need no token (construct id: method and path, with
	// "/" written "--").
	for _, r := range Routes {
		if !r.Public {
			continue
		}
		cdknag.NagSuppressions_AddResourceSuppressionsByPath(st.Stack, s("/"+*st.Node().Path()+"/HttpApi/"+r.Method+strings.ReplaceAll(r.Path, "/", "--")+"/Resource"),
			&[]*cdknag.NagPackSuppression{{Id: s("AwsSolutions-APIG4"), Reason: s(
				"A public route by design (a health check, the API's OpenAPI document, the web console's page and files): it reads nothing stored and has its own route throttle (10 requests/s)")}}, nil)
	}
	// Dead-letter queues need no dead-letter queue of their own.
	for _, q := range []constructs.IConstruct{st.SchedulerDLQ, st.TimerDLQ, st.GradingDLQ, st.StreamFailureQueue} {
		suppress(q, false, "Serverless-SQSRedrivePolicy",
			"This queue is itself a dead-letter queue (of Scheduler's targets, of the timer queue, of the grading queue, of the stream mapping): its messages wait for an operator, alarmed on depth")
	}
	suppress(st.StreamFailureQueue, false, "AwsSolutions-SQS3",
		"This queue is the on-failure destination of the stream mapping, i.e. the dead-letter queue of the table's stream batches")
	// Synchronous and stream invocations have no asynchronous failures.
	for _, fn := range []constructs.IConstruct{st.API, st.Authorizer, st.Stream, st.Grader, st.Ingest} {
		suppress(fn, false, "Serverless-LambdaDLQ",
			"Invoked synchronously (API Gateway) or by an event source mapping (the stream, whose failures go to its on-failure destination; the grading queue, whose redrive policy is its dead-letter queue): a function dead-letter queue applies to asynchronous invocations only")
	}
	suppress(st.Grader, true, "Serverless-LambdaEventSourceMappingDestination",
		"An SQS event source mapping has no on-failure destination: the grading queue's redrive policy moves a message the function failed 5 times to grading-dlq (and the sweep puts its job back)")
	suppress(st.Clock, true, "Serverless-LambdaAsyncFailureDestination",
		"The clock function's asynchronous failures go to its dead-letter queue (scheduler-dlq), whose messages are the instants as sent, replayable as they are (an on-failure destination would wrap them)")
	suppress(st.Clock, true, "Serverless-LambdaEventSourceMappingDestination",
		"An SQS event source mapping has no on-failure destination: the timer queue's redrive policy moves a message the function failed 5 times to timers-dlq")
	suppress(st.AlarmTopic, true, "Serverless-SNSRedrivePolicy",
		"An e-mail subscription: a notification SNS could not deliver would not be delivered later either; the alarm's state stays on the dashboard and in CloudWatch")
}
