package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// TestListNamesSurvivesAStaleToken: schedules deleted while the group is
// listed leave the next page's token pointing at nothing, and Scheduler
// (the emulator too) refuses it; the listing starts over rather than
// fail, and returns what is left, each name once.
func TestListNamesSurvivesAStaleToken(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	const n = 60 // the emulator's pages are of 50
	var all []string
	for i := range n {
		name := fmt.Sprintf("x-%03d", i)
		all = append(all, name)
		_, err := e.plain.CreateSchedule(ctx, &awsscheduler.CreateScheduleInput{
			Name: aws.String(name), GroupName: aws.String(e.group), ScheduleExpression: aws.String("at(2030-01-01T00:00:00)"),
			FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
			Target:             &types.Target{Arn: aws.String(targetArn), RoleArn: aws.String(roleArn), Input: aws.String("{}")},
		})
		// A create the SDK retried after its answer was lost (a busy
		// emulator) finds its own schedule: the group is new, so the
		// name can be no one else's.
		var exists *types.ConflictException
		if err != nil && !errors.As(err, &exists) {
			t.Fatal(err)
		}
	}
	// After the first page is answered, every schedule is deleted (as the
	// clock deletes the ones it fired), the one the next page's token
	// names included.
	var pages atomic.Int64
	deleted := all
	client := awsscheduler.NewFromConfig(dynamotest.Config(dynamotest.Start(t)), func(o *awsscheduler.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("deleteDuringListing",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleInitialize(ctx, in)
					if middleware.GetOperationName(ctx) == "ListSchedules" && pages.Add(1) == 1 {
						for _, name := range deleted {
							if _, err := e.plain.DeleteSchedule(ctx, &awsscheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(e.group)}); err != nil {
								t.Errorf("delete %s: %v", name, err)
							}
						}
					}
					return out, md, err
				}), middleware.After)
		})
	})
	names, err := scheduler.ListNames(ctx, scheduler.New(client, scheduler.Config{Group: e.group}), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("ListNames with schedules deleted during the listing: %v", err)
	}
	// The first page's names (which ReadSchedule then finds gone), once
	// each; the stale token made the listing start over (a third call).
	if len(names) != 50 || len(slices.Compact(slices.Sorted(slices.Values(names)))) != 50 {
		t.Fatalf("listed %d names: %v", len(names), names)
	}
	for _, name := range names {
		if !slices.Contains(all, name) {
			t.Fatalf("listed %q", name)
		}
	}
	if pages.Load() != 3 {
		t.Fatalf("%d ListSchedules calls, want 3: the first page, the refused token, the first page again", pages.Load())
	}
}
