// Command clock is the clock function. Its triggers: EventBridge Scheduler
// (one instant per one-time schedule: due, grace end, horizon or a delivery
// retry), the timer queue (SQS batches of instants, with partial batch
// failures), and the recurring sweep schedule ({"action":"sweep"}). Every
// instant is evaluated on the watcher's clock; one that arrives early is
// put back on the timer queue for what remains.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/awsrt/awsjudge"
)

func main() {
	lambda.Start(awsrt.MustStart(awsjudge.New).HandleClockEvent)
}
