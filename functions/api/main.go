// Command api is the API Lambda: API Gateway HTTP API (payload v2) requests
// served by the same net/http handler as the local server.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/awsrt"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := awsrt.FromEnv()
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(1)
	}
	cfg.Log = log
	rt, err := awsrt.New(context.Background(), cfg)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(rt.HTTP()).ProxyWithContext)
}
