package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// The timer queue beats Scheduler's one-minute precision.
//
// EventBridge Scheduler invokes targets "with 60 second precision": a
// schedule set for 1:00 runs between 1:00:00 and 1:00:59. An at() instant
// with seconds may therefore fire before it, and a one-time schedule then
// deletes itself; it may also fire up to a minute after it. So, with a
// queue:
//
//   - An instant too near for a schedule that fires before it (less than
//     three precision periods away), or due within DirectWindow (at most
//     MaxQueueDelay, SQS's longest message timer), is sent straight to the
//     queue with DelaySeconds = the time left, rounded up to the second.
//   - Any other instant gets a schedule set for the start of the precision
//     period before the instant's own (FireTime): it fires at least a whole
//     period early by Scheduler's contract, and still before the instant
//     when it is early or late by up to a period more (the local AWS mode's
//     fault injection: early by up to Precision-1s, late by up to
//     Precision).
//   - The clock handler, given an instant that has not come yet (a
//     schedule's fire, or a message that arrived early), puts it back on
//     the queue for the remainder (Rearm) rather than dropping it.
//
// So an instant is handled within a second or so after its time: the
// message timer's rounding plus the queue consumer's latency. Every arrival
// is only a wake-up call: the handler decides on the watcher's clock from
// the record, so duplicates (a schedule firing twice, the queue's
// at-least-once delivery) change nothing. What is lost for good (a
// dead-lettered fire or message) is found by the sweep, a recurring
// schedule over the open-instant index.
const (
	// DefaultPrecision is Scheduler's documented precision.
	DefaultPrecision = 60 * time.Second
	// MaxPrecision bounds Config.Precision, so that an instant too near for
	// a schedule (at most three periods away) always fits a message timer.
	MaxPrecision = 5 * time.Minute
	// MaxQueueDelay is SQS's longest message timer (DelaySeconds 900).
	MaxQueueDelay = 15 * time.Minute
)

// QueueSender sends one message to an SQS queue with a message timer
// (DelaySeconds, 0 to 900). awsclient.SQSSender is the one the runtime uses.
type QueueSender interface {
	SendMessage(ctx context.Context, queueURL, body string, delaySeconds int32) error
}

// ErrNoQueue is returned by Rearm and Enqueue when the Clock has no timer
// queue.
var ErrNoQueue = errors.New("scheduler: no timer queue (Config.QueueURL)")

// HasQueue reports whether the Clock has a timer queue.
func (c *Clock) HasQueue() bool { return c.cfg.QueueURL != "" }

// Precision returns the Scheduler precision the Clock assumes.
func (c *Clock) Precision() time.Duration { return c.cfg.Precision }

// FireTime returns the at() time of the schedule the Clock creates for an
// instant: with a queue, the start of the precision period before the one
// holding the instant; without, the instant rounded up to the second.
func (c *Clock) FireTime(in expect.Instant) time.Time {
	if c.cfg.QueueURL == "" {
		return fireTime(in.At)
	}
	return in.At.UTC().Truncate(c.cfg.Precision).Add(-c.cfg.Precision)
}

// Rearm puts an instant whose time has not come yet back on the timer
// queue, for the time left (at most MaxQueueDelay: a longer wait arrives
// early and is re-armed again). An instant whose time has come is sent
// without delay. It returns ErrNoQueue without a queue, and SQS's error
// (wrapped) when the message cannot be sent; the caller then fails, so that
// its own event is retried.
func (c *Clock) Rearm(ctx context.Context, in expect.Instant) error {
	if c.cfg.QueueURL == "" {
		return ErrNoQueue
	}
	return c.send(ctx, in, c.cfg.Now())
}

// Enqueue puts each instant on the timer queue (as Rearm does), whatever
// its time: the sweep hands over this way the deliveries it finds past due.
// Every instant is attempted; the error joins the failures.
func (c *Clock) Enqueue(ctx context.Context, ins []expect.Instant) error {
	if c.cfg.QueueURL == "" {
		return ErrNoQueue
	}
	return each(ctx, ins, func(in expect.Instant) error { return c.send(ctx, in, c.cfg.Now()) })
}

// QueueDelay is the message timer of an instant sent at now: the time left,
// rounded up to the whole second so the message never arrives before the
// instant, within [0, MaxQueueDelay].
func QueueDelay(at, now time.Time) int32 {
	wait := at.Sub(now)
	if wait <= 0 {
		return 0
	}
	if wait >= MaxQueueDelay {
		return int32(MaxQueueDelay / time.Second)
	}
	return int32((wait + time.Second - 1) / time.Second)
}

func (c *Clock) send(ctx context.Context, in expect.Instant, now time.Time) error {
	if c.cfg.SQS == nil {
		return errors.New("scheduler: Config.SQS is required with Config.QueueURL")
	}
	in.At = in.At.UTC()
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("scheduler: encode instant: %w", err)
	}
	delay := QueueDelay(in.At, now)
	err = c.call(ctx, func(ctx context.Context) error {
		return c.cfg.SQS.SendMessage(ctx, c.cfg.QueueURL, string(body), delay)
	})
	if err != nil {
		return fmt.Errorf("scheduler: send %s instant of %s/%s to the timer queue: %w", in.Kind, in.AgentID, in.ExpectationID, err)
	}
	return nil
}
