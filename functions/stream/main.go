// Command stream consumes the table's DynamoDB Stream: it schedules and
// cancels instants, delivers lapse tasks and runs VERIFY (its model grading
// goes to the grading queue, for the grader function), reporting partial
// batch failures by SequenceNumber.
//
// The metrics of each invocation are written to stdout as CloudWatch
// Embedded Metric Format when it ends.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/metrics/emf"
)

func main() {
	rt := awsrt.MustStart(nil) // no model judge: the grader function holds it
	lambda.Start(emf.FlushAfter(rt.EMF, os.Stdout, rt.HandleStream))
}
