package awsrt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
)

// Handle is HandleChange under the name feed.Run expects.
func (r *Runtime) Handle(ctx context.Context, ch store.Change) error { return r.HandleChange(ctx, ch) }

// LocalOptions tune the local AWS mode.
type LocalOptions struct {
	// PollInterval is how often the stream and the due schedules are
	// polled (default 250ms).
	PollInterval time.Duration
	// PauseFeed leaves the stream unread (tests use it to stand for a
	// crash between a commit and its asynchronous effects).
	PauseFeed bool
	// Create makes the table and the schedule group if they are missing.
	Create bool
	// BatchSize is the most changes the stream poller reads, processes and
	// acknowledges at a time (default 10, the deployed event source
	// mapping's batch size), so a crash replays at most one batch.
	BatchSize int
	// Checkpoint is the file the stream poller keeps its position in (see
	// dynamo.StreamOptions.Checkpoint); empty keeps it in memory, so a
	// restart reads the stream again from its oldest record.
	Checkpoint string
	// StreamFaults, when set, makes the stream poller deliver as AWS may:
	// out of order across items, twice, cut off mid-batch (tests).
	StreamFaults *StreamFaults
	// SchedulerFaults make the emulated Scheduler fire early, late, twice
	// or never (zero: once each, on time).
	SchedulerFaults SchedulerFaults
	// SweepInterval is how often the sweep runs, as the deployed recurring
	// schedule does every minute (default one minute; negative: never).
	SweepInterval time.Duration
	// LoseGradingJobs, while it returns true, makes the grading queue's
	// poller lose every message (deleted unhandled), as a message
	// dead-lettered or expired is lost to the grader; the sweep's repair
	// must find their jobs (tests).
	LoseGradingJobs func() bool
	// LoseTimerMessages, while it returns true, makes the timer queue's
	// poller lose every message (deleted unhandled), as a message
	// dead-lettered or expired is lost to the clock; the sweep must find
	// the instants and deliveries they carried (tests).
	LoseTimerMessages func() bool
}

// Local runs what AWS runs around the functions, against an emulator:
// it polls the table's stream into the same change processing as the
// stream Lambda, fires the schedules whose time has come through the
// clock Lambda's handler (LocalStack and moto store schedules but never
// fire them; SchedulerFaults make it fire as unkindly as Scheduler may),
// polls the timer queue into the clock handler as the SQS event source
// mapping does, and runs the sweep as the recurring schedule does.
type Local struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	reader *dynamo.StreamReader
	faults *faultyFeed
	sched  *emulatedScheduler
}

// StreamFaultCounts returns the faults the stream poller injected so far
// (zero without LocalOptions.StreamFaults).
func (l *Local) StreamFaultCounts() StreamFaultCounts {
	if l.faults == nil {
		return StreamFaultCounts{}
	}
	return l.faults.snapshot()
}

// SchedulerStats returns what the emulated Scheduler has done so far.
func (l *Local) SchedulerStats() SchedulerStats { return l.sched.stats.load() }

// StartLocal starts the pollers. Errors: the table or group is missing and
// Create is off, or the emulator is unreachable.
func StartLocal(rt *Runtime, opt LocalOptions) (*Local, error) {
	if opt.PollInterval <= 0 {
		opt.PollInterval = 250 * time.Millisecond
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 10
	}
	// What each part stands for on AWS decides whose role its AWS calls
	// need (awsops): the table, group and queue are made by
	// CloudFormation; the stream poller is the stream function's event
	// source mapping, the queue poller the clock function's, and both
	// run with that function's role; the sweep is the clock function.
	base, cancel := context.WithCancel(context.Background())
	ctx := awsops.WithFunction(base, awsops.Deployment)
	streamCtx := awsops.WithFunction(base, "stream")
	clockCtx := awsops.WithFunction(base, "clock")
	l := &Local{cancel: cancel}
	if opt.Create {
		if err := dynamo.CreateTable(ctx, rt.DynamoDB, rt.Config.Table); err != nil {
			cancel()
			return nil, fmt.Errorf("create table %s: %w", rt.Config.Table, err)
		}
		if err := rt.Clock.CreateGroup(ctx); err != nil {
			cancel()
			return nil, fmt.Errorf("create schedule group %s: %w", rt.Config.ScheduleGroup, err)
		}
	}
	arn, err := dynamo.StreamARN(ctx, rt.DynamoDB, rt.Config.Table)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("stream of table %s: %w", rt.Config.Table, err)
	}
	l.reader = dynamo.NewStreamReader(rt.Streams, arn, dynamo.StreamOptions{PollInterval: opt.PollInterval, Checkpoint: opt.Checkpoint})
	var fr store.FeedReader = batches{l.reader, opt.BatchSize}
	if opt.StreamFaults != nil {
		l.faults = newFaultyFeed(fr, *opt.StreamFaults)
		fr = l.faults
	}
	if !opt.PauseFeed {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			_ = feed.Run(streamCtx, fr, rt, rt.Log)
		}()
	}
	l.sched = newEmulatedScheduler(rt, opt.SchedulerFaults)
	schedCtx := awsops.WithFunction(base, awsops.SchedulerService)
	l.every(ctx, opt.PollInterval, func() error {
		_, err := l.sched.fire(schedCtx, rt.Watcher.Now())
		return err
	}, rt, "firing due schedules")
	// The timer queue is the clock function's, the grading queue the
	// grader function's.
	for _, q := range []struct {
		url, function string
		handle        func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	}{{rt.Config.TimerQueueURL, "clock", losing(opt.LoseTimerMessages, rt.HandleTimerQueue)}, {rt.Config.GradingQueueURL, "grader", losing(opt.LoseGradingJobs, rt.HandleGrading)}} {
		if q.url == "" {
			continue
		}
		qctx := awsops.WithFunction(base, q.function)
		poller, err := newQueuePoller(qctx, rt, q.url, q.handle)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				n, err := poller.poll(qctx)
				if err != nil && ctx.Err() == nil {
					rt.Log.Error("polling a queue", "queue", q.url, "err", err)
				}
				if n == 0 || err != nil {
					sleep(ctx, opt.PollInterval)
				}
			}
		}()
	}
	if opt.SweepInterval == 0 {
		opt.SweepInterval = time.Minute
	}
	if opt.SweepInterval > 0 {
		l.every(ctx, opt.SweepInterval, func() error {
			_, err := rt.Sweep(clockCtx)
			return err
		}, rt, "sweep")
	}
	return l, nil
}

// losing acknowledges every message unhandled while lose returns true,
// and hands them to handle otherwise.
func losing(lose func() bool, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if lose == nil {
		return handle
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if lose() {
			return events.SQSEventResponse{}, nil
		}
		return handle(ctx, ev)
	}
}

// every runs fn every interval until ctx ends, logging its errors.
func (l *Local) every(ctx context.Context, interval time.Duration, fn func() error, rt *Runtime, what string) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := fn(); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
					rt.Log.Error(what, "err", err)
				}
			}
		}
	}()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// batches reads at most n changes at a time, as an event source mapping
// hands its function batches.
type batches struct {
	store.FeedReader
	n int
}

func (b batches) ReadFeed(ctx context.Context, limit int) ([]store.Change, error) {
	return b.FeedReader.ReadFeed(ctx, min(limit, b.n))
}

// Close stops the pollers and waits for them.
func (l *Local) Close() {
	l.cancel()
	l.wg.Wait()
	_ = l.reader.Close()
}
