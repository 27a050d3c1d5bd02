// Command api is the API Lambda: API Gateway HTTP API (payload v2) requests
// served by the same net/http handler as the local server, the web console's
// files included (the other functions do not link them). The metrics of
// each invocation are written to stdout as CloudWatch Embedded Metric
// Format when it ends.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/console"
	"github.com/agentclock/clockwork/internal/mcpapi"
	"github.com/agentclock/clockwork/internal/metrics/emf"
)

func main() {
	rt := awsrt.MustStartAPI()
	mcpapi.Mount(rt.API())
	rt.API().Console = console.Assets{}
	lambda.Start(emf.FlushAfter(rt.EMF, os.Stdout, httpadapter.NewV2(rt.HTTP()).ProxyWithContext))
}
