// Command ingest is the OTLP ingest Lambda: API Gateway routes POST
// /v1/traces (OTLP/HTTP) here, behind the same authorizer as the rest of
// the HTTP API. It is a function of its own because decoding OTLP links
// the protobuf runtime, which the API function's bootstrap has no room
// for. The metrics of each invocation are written to stdout as CloudWatch
// Embedded Metric Format when it ends.
package main

import (
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/metrics/emf"
	"github.com/agentclock/clockwork/internal/otlpin"
)

func main() {
	rt := awsrt.MustStartAPI()
	h := rt.Traces()
	cfg := otlpin.DefaultConfig()
	if err := cfg.FromEnv(os.Getenv); err != nil {
		log.Fatal(err)
	}
	otlpin.Mount(h, cfg)
	lambda.Start(emf.FlushAfter(rt.EMF, os.Stdout, httpadapter.NewV2(h).ProxyWithContext))
}
