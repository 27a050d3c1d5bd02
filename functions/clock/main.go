// Command clock is the EventBridge Scheduler target: each invocation is one
// instant (due, grace end or horizon) of one expectation, evaluated on the
// watcher's clock.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

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
	lambda.Start(rt.HandleClock)
}
