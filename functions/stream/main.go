// Command stream consumes the table's DynamoDB Stream: it schedules and
// cancels instants, delivers lapse tasks and runs VERIFY, reporting partial
// batch failures by SequenceNumber.
//
// The metrics of each invocation are written to stdout as CloudWatch
// Embedded Metric Format when it ends.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/awsrt/awsjudge"
	"github.com/agentclock/clockwork/internal/metrics/emf"
)

func main() {
	rt := awsrt.MustStart(awsjudge.New)
	lambda.Start(emf.FlushAfter(rt.EMF, os.Stdout, rt.HandleStream))
}
