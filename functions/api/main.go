// Command api is the API Lambda: API Gateway HTTP API (payload v2) requests
// served by the same net/http handler as the local server, the web console's
// files included (the other functions do not link them).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/console"
	"github.com/agentclock/clockwork/internal/mcpapi"
)

func main() {
	rt := awsrt.MustStartAPI()
	mcpapi.Mount(rt.API())
	rt.API().Console = console.Assets{}
	lambda.Start(httpadapter.NewV2(rt.HTTP()).ProxyWithContext)
}
