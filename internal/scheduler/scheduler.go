// Package scheduler is the EventBridge Scheduler adapter of the clock port
// (feed.Scheduler): one one-time at() schedule per instant of an open
// expectation, in a schedule group of our own, whose target (the clock
// Lambda) receives the instant as its event.
//
// Each schedule has a deterministic name (Name), so scheduling an instant
// twice finds the first schedule (ConflictException, treated as done) and
// cancelling finds it again (DeleteSchedule; ResourceNotFoundException,
// treated as done). Schedules are created with the flexible time window off,
// ActionAfterCompletion DELETE (Scheduler removes a schedule once it has
// invoked its target), a retry policy and an SQS dead-letter queue on the
// target. Scheduler fires with 60 second precision (a schedule set for 1:00
// runs between 1:00:00 and 1:00:59), at least once rather than exactly
// once, and a target may see an event late after retries. The schedule is
// therefore only a wake-up call: the handler decides lapses on the watcher's
// clock (watcher.Service.Tick), so a schedule that fires late, early or
// twice changes nothing it should not.
//
// With a timer queue (Config.QueueURL, see queue.go) the Clock beats that
// precision: an instant too near for a schedule (or within
// Config.DirectWindow) goes straight onto the queue with a message timer,
// and any other gets a schedule set for the precision period before the
// instant's own, so that even a fire early or
// late by a whole period comes before the instant; the clock handler then
// puts the remainder on the queue (Rearm). Without a queue (the former
// design, kept for comparison) the at() time is the instant rounded up to
// the second, and an early fire is a no-op that loses the instant.
//
// An instant whose time has already come when it is scheduled gets no
// schedule: Config.Immediate handles it at once.
//
// Throttling is retried twice over: by the SDK client's retryer, and then by
// a bounded loop of this package with exponential backoff and jitter. Other
// errors are returned; every operation is idempotent, so the caller (the
// change-feed processor) simply retries the whole call.
//
// LocalStack and moto store schedules but never fire them: Due lists the
// schedules whose time has come so that the local AWS mode can fire them
// itself.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"
)

// Limits and defaults of EventBridge Scheduler that the adapter applies.
const (
	// MaxNameLen is Scheduler's limit on a schedule name; names are made of
	// [0-9a-zA-Z-_.] only.
	MaxNameLen = 64
	// DefaultMaxRetries is the target retry count used when
	// Config.MaxRetries is zero (Scheduler's own default).
	DefaultMaxRetries int32 = 185
	// MaxMaxRetries is the largest retry count Scheduler accepts.
	MaxMaxRetries int32 = 185
	// DefaultMaxEventAge (seconds) is the target event age used when
	// Config.MaxEventAge is zero (Scheduler's own default, 24 hours).
	DefaultMaxEventAge int32 = 86400
	// MinMaxEventAge and MaxMaxEventAge bound the event age (seconds) that
	// Scheduler accepts.
	MinMaxEventAge int32 = 60
	MaxMaxEventAge int32 = 86400
	// DefaultThrottleAttempts is the number of extra rounds the adapter
	// makes after the SDK gave up on a throttled call, when
	// Config.ThrottleAttempts is zero.
	DefaultThrottleAttempts = 5
	// DefaultThrottleBackoff is the first backoff of those rounds when
	// Config.ThrottleBackoff is zero; it doubles each round, up to
	// maxThrottleBackoff, each wait drawn at random from [b/2, 3b/2).
	DefaultThrottleBackoff = 200 * time.Millisecond
	maxThrottleBackoff     = 5 * time.Second
)

// Timezone is the ScheduleExpressionTimezone of every schedule: at()
// expressions are written in UTC.
const Timezone = "UTC"

// ImmediateFunc handles an instant whose time has already come. It must be
// idempotent: it is called again whenever the same instant is scheduled
// again (a change-feed retry).
type ImmediateFunc func(ctx context.Context, in expect.Instant) error

// Config configures a Clock.
type Config struct {
	// Group is the schedule group of our own that holds every schedule. It
	// is required (the default group is never used).
	Group string
	// TargetArn is the ARN of the clock Lambda that schedules invoke.
	// Required to create schedules.
	TargetArn string
	// RoleArn is the ARN of the role Scheduler assumes to invoke the target.
	// Required to create schedules.
	RoleArn string
	// DeadLetterArn is the ARN of the SQS queue that receives events whose
	// delivery to the target failed for good. Empty means no dead-letter
	// queue (deployments always set one).
	DeadLetterArn string
	// MaxRetries is the target's MaximumRetryAttempts: zero means
	// DefaultMaxRetries, a negative value means no retries, and values
	// above MaxMaxRetries are lowered to it.
	MaxRetries int32
	// MaxEventAge is the target's MaximumEventAgeInSeconds: zero means
	// DefaultMaxEventAge; other values are clamped to [MinMaxEventAge,
	// MaxMaxEventAge].
	MaxEventAge int32
	// Now is the watcher's clock; nil means time.Now.
	Now func() time.Time
	// Immediate is called at once, synchronously, for an instant whose time
	// has already come, instead of creating a schedule (typically
	// watcher.Service.Tick). Schedule fails for such an instant when it is
	// nil.
	Immediate ImmediateFunc
	// ThrottleAttempts bounds the extra rounds made for a call that is still
	// throttled after the SDK's own retries: zero means
	// DefaultThrottleAttempts, a negative value means none.
	ThrottleAttempts int
	// ThrottleBackoff is the first backoff of those rounds; zero means
	// DefaultThrottleBackoff.
	ThrottleBackoff time.Duration

	// SQS sends to the timer queue at QueueURL, a standard SQS queue whose
	// consumer is the clock handler (queue.go). Empty QueueURL: no queue,
	// one schedule at each instant (the former design).
	SQS      QueueSender
	QueueURL string
	// Precision is Scheduler's firing precision: a schedule set for t fires
	// in [t, t+Precision). Zero means DefaultPrecision; it is rounded down
	// to whole seconds and bounded by [time.Second, MaxPrecision]. The
	// local AWS mode scales it down so that tests stay fast.
	Precision time.Duration
	// DirectWindow: an instant due within it goes straight onto the queue
	// (at most MaxQueueDelay). Zero or negative: only instants too near for
	// a schedule that fires before them do; the others get a schedule,
	// which is deleted for free when the expectation closes first, where a
	// message, once sent, arrives and costs an invocation.
	DirectWindow time.Duration
}

// Clock is the EventBridge Scheduler adapter of the clock port
// (feed.Scheduler). It keeps no state besides its configuration and is safe
// for concurrent use.
type Clock struct {
	client *awsscheduler.Client
	cfg    Config
}

// New returns a Clock that manages the schedules of cfg.Group with client.
// The configuration is checked when it is used: Schedule, Cancel, Due and
// CreateGroup return an error when cfg.Group is empty, and Schedule when a
// schedule must be created without cfg.TargetArn or cfg.RoleArn.
func New(client *awsscheduler.Client, cfg Config) *Clock {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	case cfg.MaxRetries > MaxMaxRetries:
		cfg.MaxRetries = MaxMaxRetries
	}
	switch {
	case cfg.MaxEventAge == 0:
		cfg.MaxEventAge = DefaultMaxEventAge
	case cfg.MaxEventAge < MinMaxEventAge:
		cfg.MaxEventAge = MinMaxEventAge
	case cfg.MaxEventAge > MaxMaxEventAge:
		cfg.MaxEventAge = MaxMaxEventAge
	}
	switch {
	case cfg.ThrottleAttempts == 0:
		cfg.ThrottleAttempts = DefaultThrottleAttempts
	case cfg.ThrottleAttempts < 0:
		cfg.ThrottleAttempts = 0
	}
	if cfg.ThrottleBackoff <= 0 {
		cfg.ThrottleBackoff = DefaultThrottleBackoff
	}
	cfg.Precision = cfg.Precision.Truncate(time.Second)
	switch {
	case cfg.Precision == 0:
		cfg.Precision = DefaultPrecision
	case cfg.Precision < time.Second:
		cfg.Precision = time.Second
	case cfg.Precision > MaxPrecision:
		cfg.Precision = MaxPrecision
	}
	cfg.DirectWindow = min(max(cfg.DirectWindow, 0), MaxQueueDelay)
	return &Clock{client: client, cfg: cfg}
}

// Group returns the name of the schedule group the Clock manages.
func (c *Clock) Group() string { return c.cfg.Group }

func (c *Clock) checkGroup() error {
	if c.cfg.Group == "" {
		return errors.New("scheduler: Config.Group is required")
	}
	return nil
}

// Schedule arranges for each instant to reach the clock handler at or after
// its time. An instant whose time has already come (At not after Now) is
// passed to Config.Immediate at once and gets no schedule; any other gets
// one one-time schedule named Name(in) in the group, whose target input is
// the instant as JSON. A schedule that already exists
// (ConflictException) counts as created, so scheduling an instant twice is
// not an error; should Scheduler refuse the at() time as invalid while the
// instant's time has come in the meantime, the instant goes to Immediate
// instead.
//
// Every instant is attempted. The error, when not nil, joins one error per
// instant that was neither scheduled nor handled (wrapping the SDK's error,
// or Immediate's), or reports a missing Group, TargetArn, RoleArn or
// Immediate; retrying the whole call is safe.
func (c *Clock) Schedule(ctx context.Context, ins []expect.Instant) error {
	if err := c.checkGroup(); err != nil {
		return err
	}
	return each(ctx, ins, func(in expect.Instant) error { return c.scheduleOne(ctx, in) })
}

// each runs op on every instant, stopping only when ctx ends, and joins the
// errors (ctx's included).
func each(ctx context.Context, ins []expect.Instant, op func(expect.Instant) error) error {
	var errs []error
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := op(in); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Clock) immediate(ctx context.Context, in expect.Instant) error {
	if c.cfg.Immediate == nil {
		return fmt.Errorf("scheduler: %s instant of %s/%s at %s has come and Config.Immediate is nil",
			in.Kind, in.AgentID, in.ExpectationID, expect.FormatTime(in.At))
	}
	if err := c.cfg.Immediate(ctx, in); err != nil {
		return fmt.Errorf("scheduler: immediate %s instant of %s/%s: %w", in.Kind, in.AgentID, in.ExpectationID, err)
	}
	return nil
}

func (c *Clock) scheduleOne(ctx context.Context, in expect.Instant) error {
	in.At = in.At.UTC()
	now := c.cfg.Now()
	if !in.At.After(now) {
		return c.immediate(ctx, in)
	}
	fire := c.FireTime(in)
	if c.cfg.QueueURL != "" && (in.At.Sub(now) <= c.cfg.DirectWindow || fire.Sub(now) < c.cfg.Precision) {
		// Near enough for a message timer, or too near for a schedule
		// that fires before the instant.
		return c.send(ctx, in, now)
	}
	if c.cfg.TargetArn == "" || c.cfg.RoleArn == "" {
		return errors.New("scheduler: Config.TargetArn and Config.RoleArn are required to create schedules")
	}
	input, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("scheduler: encode instant: %w", err)
	}
	target := &types.Target{
		Arn:     aws.String(c.cfg.TargetArn),
		RoleArn: aws.String(c.cfg.RoleArn),
		Input:   aws.String(string(input)),
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(c.cfg.MaxRetries),
			MaximumEventAgeInSeconds: aws.Int32(c.cfg.MaxEventAge),
		},
	}
	if c.cfg.DeadLetterArn != "" {
		target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(c.cfg.DeadLetterArn)}
	}
	name := NameAt(in, fire)
	err = c.call(ctx, func(ctx context.Context) error {
		_, err := c.client.CreateSchedule(ctx, &awsscheduler.CreateScheduleInput{
			Name:                       aws.String(name),
			GroupName:                  aws.String(c.cfg.Group),
			ScheduleExpression:         aws.String(expression(fire)),
			ScheduleExpressionTimezone: aws.String(Timezone),
			FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
			ActionAfterCompletion:      types.ActionAfterCompletionDelete,
			Target:                     target,
		})
		return err
	})
	var conflict *types.ConflictException
	var invalid *types.ValidationException
	switch {
	case err == nil, errors.As(err, &conflict):
		return nil
	case errors.As(err, &invalid) && !fire.After(c.cfg.Now()):
		// The instant's time came while the schedule was being created.
		return c.immediate(ctx, in)
	}
	return fmt.Errorf("scheduler: create schedule %s/%s: %w", c.cfg.Group, name, err)
}

// Cancel deletes the schedule of each instant (by Name, in the group). A
// schedule that does not exist (ResourceNotFoundException: never created,
// already fired and deleted by Scheduler, or already cancelled) counts as
// deleted, so cancelling twice is not an error. Instants whose time has
// passed are deleted too, since their schedule may not have fired yet.
//
// Every instant is attempted; the error, when not nil, joins one error per
// schedule that could not be deleted (wrapping the SDK's error), or reports
// a missing Group. Retrying the whole call is safe.
func (c *Clock) Cancel(ctx context.Context, ins []expect.Instant) error {
	if err := c.checkGroup(); err != nil {
		return err
	}
	return each(ctx, ins, func(in expect.Instant) error { return c.deleteName(ctx, NameAt(in, c.FireTime(in))) })
}

// Delete deletes the schedule of one instant, as Cancel does: a schedule
// that does not exist counts as deleted. The local AWS mode calls it after
// handling an instant returned by Due.
func (c *Clock) Delete(ctx context.Context, in expect.Instant) error {
	return c.Cancel(ctx, []expect.Instant{in})
}

func (c *Clock) deleteName(ctx context.Context, name string) error {
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.client.DeleteSchedule(ctx, &awsscheduler.DeleteScheduleInput{
			Name:      aws.String(name),
			GroupName: aws.String(c.cfg.Group),
		})
		return err
	})
	var notFound *types.ResourceNotFoundException
	if err == nil || errors.As(err, &notFound) {
		return nil
	}
	return fmt.Errorf("scheduler: delete schedule %s/%s: %w", c.cfg.Group, name, err)
}

// CreateGroup creates the Clock's schedule group unless it exists. It is
// idempotent: an existing group (found, or ConflictException) is left as
// it is, schedules included. Deployments create the group with the stack;
// tests and the local AWS mode call this. It returns the SDK's error
// (wrapped) when the group can be neither read nor created, or an error for
// a missing Group.
func (c *Clock) CreateGroup(ctx context.Context) error {
	if err := c.checkGroup(); err != nil {
		return err
	}
	// Look first: moto's CreateScheduleGroup replaces an existing group and
	// drops its schedules, where Scheduler answers ConflictException.
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.client.GetScheduleGroup(ctx, &awsscheduler.GetScheduleGroupInput{Name: aws.String(c.cfg.Group)})
		return err
	})
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &notFound):
		return fmt.Errorf("scheduler: get schedule group %s: %w", c.cfg.Group, err)
	}
	err = c.call(ctx, func(ctx context.Context) error {
		_, err := c.client.CreateScheduleGroup(ctx, &awsscheduler.CreateScheduleGroupInput{Name: aws.String(c.cfg.Group)})
		return err
	})
	var conflict *types.ConflictException
	if err == nil || errors.As(err, &conflict) {
		return nil
	}
	return fmt.Errorf("scheduler: create schedule group %s: %w", c.cfg.Group, err)
}

// call runs op, and runs it again with backoff while it fails with a
// throttling error after the SDK's own retries, at most
// Config.ThrottleAttempts more times. It returns op's last error, or the
// context's error when ctx ends during a backoff.
func (c *Clock) call(ctx context.Context, op func(context.Context) error) error {
	backoff := c.cfg.ThrottleBackoff
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		if err == nil || attempt >= c.cfg.ThrottleAttempts || !throttled(err) {
			return err
		}
		wait := time.Duration(rand.Int64N(int64(backoff))) + backoff/2
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, maxThrottleBackoff)
	}
}

// throttled reports whether err is a throttling error of the service.
func throttled(err error) bool {
	var te *types.ThrottlingException
	if errors.As(err, &te) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded":
			return true
		}
	}
	return false
}
