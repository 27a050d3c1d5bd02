// Command stream consumes the table's DynamoDB Stream: it schedules and
// cancels instants, delivers lapse tasks and runs VERIFY, reporting partial
// batch failures by SequenceNumber.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/awsrt/awsjudge"
)

func main() {
	lambda.Start(awsrt.MustStart(awsjudge.New).HandleStream)
}
