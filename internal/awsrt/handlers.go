package awsrt

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
)

// HandleClock handles one instant: a Scheduler fire, a timer-queue message
// or an instant whose time had come when it was scheduled. It evaluates the
// record on the watcher's clock, so an instant that arrives late or twice
// changes nothing it should not, because Tick decides from the record and
// the current time, not from the event. An instant that arrives early is
// not dropped: with a timer queue it is put back on the queue for what
// remains (or, within InlineWait, waited for here); without one (the
// former design) it is a no-op, and the instant is lost.
func (r *Runtime) HandleClock(ctx context.Context, in expect.Instant) error {
	if in.AgentID == "" || in.ExpectationID == "" {
		// A malformed event can never succeed: log it and drop it rather
		// than have Scheduler retry it into the dead-letter queue.
		r.Log.Error("clock event without agentId or expectationId", "event", in)
		return nil
	}
	if r.Clock.HasQueue() && !in.At.IsZero() {
		wait := in.At.Sub(r.Watcher.Now())
		if wait > InlineWait {
			return r.Clock.Rearm(ctx, in)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	if in.Kind == expect.InstantNotify {
		// As a lapse task's: the outcome is committed on the
		// notification, whose change enqueues the next attempt.
		r.Notify.Attempt(ctx, in.AgentID, in.ExpectationID)
		return nil
	}
	if in.Kind == expect.InstantDeliver {
		// A failed attempt is recorded on the record; its change schedules
		// the next one.
		r.Outbox.Attempt(ctx, in.AgentID, in.ExpectationID)
		return nil
	}
	return r.Watcher.Tick(ctx, in)
}

// inlineOutbox collects the lapses a change asks to deliver, so the stream
// handler can deliver them synchronously after processing the change.
type inlineOutbox struct {
	mu   sync.Mutex
	jobs [][2]string
}

func (o *inlineOutbox) Enqueue(agentID, expectationID string) {
	o.mu.Lock()
	o.jobs = append(o.jobs, [2]string{agentID, expectationID})
	o.mu.Unlock()
}

func (o *inlineOutbox) take() [][2]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	j := o.jobs
	o.jobs = nil
	return j
}

// HandleChange processes one change and makes one delivery attempt for
// each lapse it asks to deliver. A failed attempt is recorded on the
// record, which produces a new change and so the next attempt (after the
// backoff the record's attempt count implies); the last failure
// dead-letters it. Only processing errors are returned (the change must be
// retried); delivery failures are state, not errors.
func (r *Runtime) HandleChange(ctx context.Context, ch store.Change) error {
	if err := r.Feed.Handle(ctx, ch); err != nil {
		r.inline.take()
		return err
	}
	for _, j := range r.inline.take() {
		rec, err := r.Watcher.Get(ctx, j[0], j[1])
		if errs.Is(err, errs.NotFound) {
			continue // a replayed change of a record no longer stored
		}
		if err != nil {
			return err
		}
		// After a failure, the next attempt waits for its backoff. Rather
		// than hold up the shard, ask the Scheduler to bring it back then.
		if r.Outbox.NotBefore(rec) > 0 {
			at, _ := expect.ParseTime(rec.Delivery.NextAttemptAt)
			in := expect.Instant{AgentID: j[0], ExpectationID: j[1], Kind: expect.InstantDeliver, At: at}
			if err := r.Clock.Schedule(ctx, []expect.Instant{in}); err != nil {
				return err
			}
			continue
		}
		r.Outbox.Attempt(ctx, j[0], j[1])
	}
	return nil
}

// streamMargin is how long before the stream function's deadline it stops
// taking on another record: a record's processing (its schedules, a lapse
// task's attempt bounded by the delivery timeout) fits in it.
const streamMargin = 15 * time.Second

// streamNearDeadline reports whether ctx's deadline is within streamMargin.
func streamNearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < streamMargin
}

// HandleStream processes a DynamoDB Stream batch in order. On the first
// record that fails (undecodable, or its processing failed) it stops and
// reports that record's SequenceNumber as the batch item failure, so Lambda
// retries from there (bisecting, then sending poison records to the
// on-failure destination); every record before it is done. Replays are
// harmless: processing is idempotent.
func (r *Runtime) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for i, rec := range ev.Records {
		// Stop before the function's deadline rather than be cut off
		// mid-record: the rest of the batch comes back from here (and
		// what it would have done that is repaired by the sweep is
		// repaired even if it never does).
		if i > 0 && streamNearDeadline(ctx) {
			r.Log.Warn("stream batch stopped before the function's deadline; the rest comes back", "records", len(ev.Records)-i)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			return resp, nil
		}
		ch, err := dynamo.ChangeFromStreamRecord(rec)
		if err == nil {
			err = r.HandleChange(ctx, ch)
		}
		if err != nil {
			r.Log.Error("stream record failed", "sequenceNumber", rec.Change.SequenceNumber, "eventID", rec.EventID, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			return resp, nil
		}
	}
	return resp, nil
}
