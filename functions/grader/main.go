// Command grader is the grader function: it consumes the grading queue
// (SQS batches, with partial batch failures), each message one HEURISTIC
// criterion of a VERIFY to grade with the model judge. A judge call that
// fails puts the job back with its backoff; the outcome is recorded on the
// VERIFY (a new signed version when graded).
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
	rt := awsrt.MustStartGrader(awsjudge.New)
	lambda.Start(emf.FlushAfter(rt.EMF, os.Stdout, rt.HandleGrading))
}
