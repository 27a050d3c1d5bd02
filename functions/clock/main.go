// Command clock is the EventBridge Scheduler target: each invocation is one
// instant (due, grace end or horizon) of one expectation, evaluated on the
// watcher's clock.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/awsrt"
)

func main() {
	lambda.Start(awsrt.MustStart().HandleClock)
}
