package awsrt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// InlineWait is the longest the clock handler waits in place for an instant
// that arrived early, instead of putting it back on the timer queue (whose
// message timers count whole seconds).
const InlineWait = time.Second

// DefaultSweepAfter is how long past its time an open instant, or a lapse
// delivery past its next attempt, must be before the sweep takes it up:
// long enough that the normal path (schedule or timer message, within a
// second or two) has had its turn, so the sweep rarely duplicates work.
const DefaultSweepAfter = time.Minute

// MaxSweepRecords bounds the records one round of the sweep processes; a
// run makes up to SweepRounds rounds while it is truncated and the clock
// function has time, and the next run (a minute later) goes on.
const MaxSweepRecords = 2000

// SweepRounds bounds the rounds of one sweep run, and sweepRoundPause
// separates them (the indexes show a round's moves a moment later).
const (
	SweepRounds     = 4
	sweepRoundPause = 2 * time.Second
)

// SweepEvent is the input of the recurring sweep schedule:
// {"action":"sweep","scheduledTime":"<aws.scheduler.scheduled-time>"}.
type SweepEvent struct {
	Action string `json:"action"`
	// ScheduledTime is when Scheduler meant the sweep to run (it replaces
	// the context attribute in the schedule's input); empty in local runs.
	ScheduledTime string `json:"scheduledTime,omitempty"`
}

// SweepMaxAge is how late a sweep invocation may start and still run.
// Lambda keeps an asynchronous invocation for the function's maximum event
// age (6 hours, which Scheduler's fires of instants need) and retries it
// twice; a sweep has a successor every minute, so one that waited longer
// than this does nothing rather than run hours late or run again.
const SweepMaxAge = 2 * time.Minute

// staleSweep reports whether a sweep scheduled at scheduled is too late
// to run at now (SweepMaxAge). A time it cannot read is not stale.
func staleSweep(scheduled string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, scheduled)
	return err == nil && now.Sub(t) > SweepMaxAge
}

// SweepAction is SweepEvent.Action of a sweep.
const SweepAction = "sweep"

// HandleClockEvent is the clock function's handler. The function has three
// triggers, told apart by the event's shape: a timer-queue batch (an SQS
// event, answered with its partial batch failures), the recurring sweep
// ({"action":"sweep"}; skipped when it starts more than SweepMaxAge after
// its scheduledTime), and an instant (a Scheduler fire). An error makes
// the invoker retry the whole event.
func (r *Runtime) HandleClockEvent(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		Action        string `json:"action"`
		ScheduledTime string `json:"scheduledTime"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		r.Log.Error("clock event is not a JSON object", "err", err)
		return nil, nil
	}
	switch {
	case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decode SQS event: %w", err)
		}
		return r.HandleTimerQueue(ctx, ev)
	case probe.Action == SweepAction && staleSweep(probe.ScheduledTime, r.Watcher.Now()):
		r.Log.Warn("sweep skipped: it started too long after its scheduled time (a later sweep has run or will)", "scheduledTime", probe.ScheduledTime, "maxAge", SweepMaxAge.String())
		return nil, nil
	case probe.Action == SweepAction:
		if _, perr := time.Parse(time.RFC3339, probe.ScheduledTime); probe.ScheduledTime != "" && perr != nil {
			r.Log.Warn("sweep input's scheduledTime is not an RFC 3339 time (did Scheduler not substitute its context attribute?); the sweep runs", "scheduledTime", probe.ScheduledTime)
		}
		res, err := r.Sweep(ctx)
		r.Log.Info("sweep", "ticked", res.Ticked, "deliveries", res.Deliveries, "effects", res.Effects, "truncated", res.Truncated, "err", err)
		return res, err
	case probe.Action != "":
		r.Log.Error("clock event with an unknown action", "action", probe.Action)
		return nil, nil
	}
	var in expect.Instant
	if err := json.Unmarshal(raw, &in); err != nil {
		r.Log.Error("clock event is not an instant", "err", err)
		return nil, nil
	}
	return nil, r.HandleClock(ctx, in)
}

// HandleTimerQueue handles a batch of the timer queue, as Lambda's SQS event
// source mapping delivers it: each message body is one instant, handled by
// HandleClock (the records of a batch concurrently). A message that fails is
// reported in batchItemFailures by its messageId, so that only it comes
// back (after the queue's visibility timeout; after maxReceiveCount it goes
// to the queue's dead-letter queue, and the sweep still finds the instant).
// A body that is not an instant is logged and dropped: it can never
// succeed.
func (r *Runtime) HandleTimerQueue(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return concurrentBatch(ev, func(m events.SQSMessage) func() error {
		var in expect.Instant
		dec := json.NewDecoder(bytes.NewReader([]byte(m.Body)))
		if err := dec.Decode(&in); err != nil || in.AgentID == "" || in.ExpectationID == "" {
			r.Log.Error("timer message is not an instant", "messageId", m.MessageId, "err", err)
			return nil
		}
		return func() error {
			err := r.HandleClock(ctx, in)
			if err != nil {
				r.Log.Error("timer message failed", "messageId", m.MessageId, "agent", in.AgentID, "expectation", in.ExpectationID, "err", err)
			}
			return err
		}
	}), nil
}

// concurrentBatch handles the messages of an SQS batch at once, as the
// queues' handlers do: prepare decodes a message and returns its work (nil
// to drop a message that can never succeed); a message whose work fails
// is reported in batchItemFailures by its messageId, so only it comes back.
func concurrentBatch(ev events.SQSEvent, prepare func(events.SQSMessage) func() error) events.SQSEventResponse {
	var (
		resp events.SQSEventResponse
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	for _, m := range ev.Records {
		work := prepare(m)
		if work == nil {
			continue
		}
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if err := work(); err != nil {
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
				mu.Unlock()
			}
		}(m.MessageId)
	}
	wg.Wait()
	return resp
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	// Ticked is the number of open expectations with an instant past due
	// that were evaluated.
	Ticked int `json:"ticked"`
	// Deliveries is the number of lapse deliveries past their next attempt
	// that were handed to the timer queue (or attempted, without one).
	Deliveries int `json:"deliveries"`
	// Truncated is set when MaxSweepRecords was reached, or the run
	// stopped before the function's deadline; the next run goes on (the
	// index is the cursor: what was ticked has left it).
	Truncated bool `json:"truncated"`
	// Skipped counts the records the sweep could not process and left for
	// the next run (a record that does not decode, a chunk of ticks that
	// kept failing), reported rather than aborting the run.
	Skipped int `json:"skipped"`
	// Notifications counts the notifications past their attempt's time
	// that were put back on the timer queue.
	Notifications int `json:"notifications"`
	// Grading counts the grading jobs put back on the grading queue
	// because they were late past Config.GradingRepairAfter.
	Grading int `json:"grading,omitempty"`
	// Evaluations counts the running evaluations enqueued again because
	// they made no progress for DefaultEvaluationRepairAfter.
	Evaluations int `json:"evaluations,omitempty"`
	// Reviews counts the review items whose due time was raised or
	// satisfied because the process that made them stopped before.
	Reviews int `json:"reviews,omitempty"`
	// Effects counts the changes whose effects were redone because their
	// marker was older than Config.EffectsRepairAfter (the stream record
	// was lost or is still failing).
	Effects int `json:"effects,omitempty"`
}

// DefaultEffectsRepairAfter is how old an effect marker must be before
// the sweep redoes its change's effects: past the stream function's
// normal lag, so that the sweep rarely duplicates its work.
const DefaultEffectsRepairAfter = 5 * time.Minute

// sweepMargin is how long before the function's deadline the sweep stops
// taking on more work, so that it ends cleanly (and the outbox half runs)
// rather than being cut off.
const sweepMargin = 5 * time.Second

// sweepChunk is how many instants the sweep ticks at once.
const sweepChunk = 50

// nearDeadline reports whether ctx's deadline is within sweepMargin.
func nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < sweepMargin
}

// Sweep is the safety net under the schedules and the timer queue: it
// processes what is past due by more than Config.SweepAfter and that
// nothing processed (a fire or message dead-lettered, an instant lost by
// any path). It reads the open-instant index (gsi5 OPEN shards, ordered by
// each record's next instant) up to the cutoff and evaluates those records
// on the watcher's clock (TickMany: idempotent, as every path is); and it
// reads the outbox partition for lapses whose next delivery attempt is past
// the cutoff and puts them on the timer queue. At most MaxSweepRecords
// records per run. The index may lag the table (a GSI): what it has not
// shown yet, the next run finds.
func (r *Runtime) Sweep(ctx context.Context) (SweepResult, error) {
	res, err := r.sweepInstants(ctx)
	// A backlog beyond one round's MaxSweepRecords: more rounds while the
	// function has time, each after the indexes have shown the last
	// round's moves (GSIs lag their table by a moment), so a run takes
	// up to SweepRounds times as much before the next minute's goes on.
	for round := 1; round < SweepRounds && err == nil && res.Truncated && !nearDeadline(ctx); round++ {
		if sleep(ctx, sweepRoundPause); ctx.Err() != nil {
			break
		}
		var more SweepResult
		more, err = r.sweepInstants(ctx)
		res.Ticked, res.Deliveries, res.Skipped = res.Ticked+more.Ticked, res.Deliveries+more.Deliveries, res.Skipped+more.Skipped
		res.Truncated = more.Truncated
	}
	if err != nil || nearDeadline(ctx) {
		return res, err
	}
	// The notifications whose attempt is late: its message was lost.
	res.Notifications, err = r.sweepNotifications(ctx)
	if err != nil || nearDeadline(ctx) {
		return res, err
	}
	// The grading jobs late past the repair bound: their message was lost
	// or dead-lettered (see HandleGrading).
	if g := r.grader(); g != nil {
		after := r.Config.GradingRepairAfter
		if after <= 0 {
			after = DefaultGradingRepairAfter
		}
		res.Grading, err = r.Eval.RepairGrading(ctx, g, after, MaxSweepRecords)
		if err != nil || nearDeadline(ctx) {
			return res, err
		}
	}
	// The evaluations that made no progress: their step's message was
	// lost, or its holder died.
	if e := r.evaluator(); e != nil {
		res.Evaluations, err = r.Eval.RepairEvaluations(ctx, e, DefaultEvaluationRepairAfter, MaxSweepRecords)
		if err != nil || nearDeadline(ctx) {
			return res, err
		}
	}
	// The review items whose due time the watcher was not told of. One
	// that fails is logged and left for the next run: it must not keep
	// the effects' repair below from running.
	var rerr error
	res.Reviews, rerr = r.Eval.RepairReviews(ctx, DefaultReviewRepairAfter, maxReviewRepairs)
	if rerr != nil {
		r.Log.Warn("sweep: review due times left for the next run", "err", rerr)
	}
	if nearDeadline(ctx) {
		return res, nil
	}
	// The changes whose effects their stream record did not bring about
	// (discarded after its retries or maximum age, or still failing).
	res.Effects, err = r.RepairEffects(ctx)
	return res, err
}

// RepairEffects redoes, as the stream function would, the effects of the
// changes whose marker is older than Config.EffectsRepairAfter (at most
// MaxSweepRecords), and returns how many it redid.
func (r *Runtime) RepairEffects(ctx context.Context) (int, error) {
	after := r.Config.EffectsRepairAfter
	if after <= 0 {
		after = DefaultEffectsRepairAfter
	}
	now := r.Watcher.Now()
	start := int(now.Unix()/60) % effects.Shards
	// Each marker may make a lapse task's attempt (bounded by its own
	// timeout): the run stops taking them before the function's deadline.
	n, err := effects.Repair(ctx, r.Store, now.Add(-after), start, MaxSweepRecords, func() bool { return streamNearDeadline(ctx) }, r.HandleChange)
	if n > 0 {
		r.Log.Warn("sweep: redid the effects of changes the stream did not process", "changes", n)
		metrics.Or(r.Config.Metrics).Record(metrics.EffectsRepaired, float64(n))
	}
	return n, err
}

// sweepNotifications puts back on the timer queue the notifications whose
// next attempt is more than SweepAfter past (at most MaxSweepRecords).
func (r *Runtime) sweepNotifications(ctx context.Context) (int, error) {
	after := r.Config.SweepAfter
	if after <= 0 {
		after = DefaultSweepAfter
	}
	now := r.Watcher.Now()
	var late []expect.Instant
	err := r.Notify.Pending(ctx, now.Add(-after), MaxSweepRecords, func(agent, id string) error {
		late = append(late, expect.Instant{AgentID: agent, ExpectationID: id, Kind: expect.InstantNotify, At: now})
		return nil
	})
	if err != nil || len(late) == 0 {
		return 0, err
	}
	done, _, err := r.putBack(ctx, late, func(agent, id string) { r.Notify.Attempt(ctx, agent, id) })
	return done, err
}

// putBack hands late work back a chunk at a time, stopping before ctx's
// deadline (the next run finds the rest): onto the timer queue, or, without
// one, to attempt directly. It returns how many it handed back and whether
// it stopped early.
func (r *Runtime) putBack(ctx context.Context, ins []expect.Instant, attempt func(agent, id string)) (int, bool, error) {
	done := 0
	for len(ins) > 0 {
		if nearDeadline(ctx) {
			return done, true, nil
		}
		part := ins[:min(sweepChunk, len(ins))]
		ins = ins[len(part):]
		if !r.Clock.HasQueue() {
			for _, in := range part {
				attempt(in.AgentID, in.ExpectationID)
			}
		} else if err := r.Clock.Enqueue(ctx, part); err != nil {
			return done, false, err
		}
		done += len(part)
	}
	return done, false, nil
}

// sweepInstants is the sweep's part for instants and deliveries.
func (r *Runtime) sweepInstants(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	after := r.Config.SweepAfter
	if after <= 0 {
		after = DefaultSweepAfter
	}
	now := r.Watcher.Now()
	cutoff := now.Add(-after)
	// Index sort keys start with the time in RFC 3339, fixed width up to
	// the seconds: everything strictly before the cutoff's second sorts at
	// or below that prefix.
	upTo := cutoff.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05")
	budget := MaxSweepRecords
	var ticks []expect.Instant
	// The shards are read from one that turns with each minute, so a run
	// cut short by its budget or deadline does not always leave the same
	// shards to the next.
	start := int(now.Unix()/60) % watcher.OpenShards
	for i := range watcher.OpenShards {
		shard := (start + i) % watcher.OpenShards
		if nearDeadline(ctx) {
			res.Truncated = true
			break
		}
		recs, more, skipped, err := r.indexed(ctx, watcher.OpenPK(shard), upTo, budget)
		if err != nil {
			return res, err
		}
		res.Skipped += skipped
		budget -= len(recs)
		res.Truncated = res.Truncated || more
		for _, rec := range recs {
			for _, in := range expect.Instants(rec) {
				if !in.At.After(now) {
					ticks = append(ticks, in)
				}
			}
			res.Ticked++
		}
		if budget <= 0 {
			break
		}
	}
	// Ticked a chunk at a time, stopping before the deadline; a chunk that
	// fails (a record its code cannot read, a transaction that keeps
	// conflicting) is reported and left to the next run, not the end of
	// this one.
	for len(ticks) > 0 {
		if nearDeadline(ctx) {
			res.Truncated = true
			break
		}
		part := ticks[:min(sweepChunk, len(ticks))]
		ticks = ticks[len(part):]
		if err := r.Watcher.TickMany(ctx, part); err != nil {
			if ctx.Err() != nil {
				return res, err
			}
			res.Skipped += len(part)
			r.Log.Error("sweep: ticking a chunk failed; left for the next run", "instants", len(part), "err", err)
		}
	}
	if res.Skipped > 0 {
		metrics.Or(r.Config.Metrics).Record(metrics.SweepSkipped, float64(res.Skipped))
	}
	if budget <= 0 {
		return res, nil
	}
	var recs []*expect.Record
	// The outbox shards too, from one that turns with each minute.
	first := int(now.Unix()/60) % watcher.QueueShards
	for i := range watcher.QueueShards {
		shard := (first + i) % watcher.QueueShards
		if nearDeadline(ctx) {
			res.Truncated = true
			break
		}
		got, more, skipped, err := r.indexed(ctx, watcher.OutboxPK(shard), upTo, budget)
		if err != nil {
			return res, err
		}
		res.Skipped += skipped
		recs = append(recs, got...)
		budget -= len(got)
		res.Truncated = res.Truncated || more
		if budget <= 0 {
			break
		}
	}
	var deliver []expect.Instant
	for _, rec := range recs {
		if !watcher.PendingDelivery(rec) {
			continue
		}
		if next, err := expect.ParseTime(rec.Delivery.NextAttemptAt); err == nil && next.After(cutoff) {
			continue // its retry is scheduled and not late yet
		}
		deliver = append(deliver, expect.Instant{AgentID: rec.AgentID, ExpectationID: rec.Expectation.ExpectationID, Kind: expect.InstantDeliver, At: now})
	}
	n, stopped, err := r.putBack(ctx, deliver, func(agent, id string) { r.Outbox.Attempt(ctx, agent, id) })
	res.Deliveries, res.Truncated = n, res.Truncated || stopped
	return res, err
}

// indexed reads up to limit records of one gsi5 partition whose sort key is
// at or below upTo, and reports whether more were left and how many items
// it skipped because they did not decode as records (logged).
func (r *Runtime) indexed(ctx context.Context, pk, upTo string, limit int) ([]*expect.Record, bool, int, error) {
	var out []*expect.Record
	skipped := 0
	q := store.Query{Index: store.GSI5, PK: pk, SKUpTo: upTo, Limit: min(limit, store.MaxLimit)}
	for {
		p, err := r.Store.Query(ctx, q)
		if err != nil {
			return nil, false, skipped, fmt.Errorf("sweep %s: %w", pk, err)
		}
		for _, it := range p.Items {
			rec, err := watcher.DecodeRecord(it)
			if err != nil {
				skipped++
				r.Log.Error("sweep: an indexed item is not a record; skipped", "key", it.Key.String(), "err", err)
				continue
			}
			out = append(out, rec)
		}
		if p.Next == "" {
			return out, false, skipped, nil
		}
		if len(out) >= limit {
			return out, true, skipped, nil
		}
		q.After = p.Next
		q.Limit = min(limit-len(out), store.MaxLimit)
	}
}

// TimerQueue names the timer queue and its dead-letter queue.
type TimerQueue struct {
	URL, ARN       string
	DLQURL, DLQARN string
}

// TimerQueueMaxReceives is the timer queue's maxReceiveCount: a message the
// clock handler failed this many times goes to the dead-letter queue (the
// sweep still finds its instant).
const TimerQueueMaxReceives = 5

// CreateTimerQueue creates the timer queue (a standard queue, SSE with
// SQS-managed keys) and its dead-letter queue, named name and name-dlq,
// unless they exist, and returns their URLs and ARNs. Deployments create
// them with the stack; the local AWS mode and tests call this. Errors wrap
// SQS's.
func CreateTimerQueue(ctx context.Context, client *awsclient.SQSSender, name string) (TimerQueue, error) {
	var q TimerQueue
	var err error
	if q.DLQURL, q.DLQARN, err = awsclient.CreateSQSQueue(ctx, client, name+"-dlq", map[string]string{"MessageRetentionPeriod": "1209600", "SqsManagedSseEnabled": "true"}); err != nil {
		return q, err
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": q.DLQARN, "maxReceiveCount": TimerQueueMaxReceives})
	q.URL, q.ARN, err = awsclient.CreateSQSQueue(ctx, client, name, map[string]string{"RedrivePolicy": string(redrive), "VisibilityTimeout": "60", "SqsManagedSseEnabled": "true"})
	return q, err
}
