// Command authorizer is the HTTP API's Lambda authorizer: it authenticates
// the bearer token and hands the principal to the API function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentclock/clockwork/internal/authorizer"
)

func main() {
	lambda.Start(authorizer.MustStart().Handle)
}
