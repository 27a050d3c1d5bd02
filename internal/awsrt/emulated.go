package awsrt

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/scheduler"
)

// SchedulerFaults make the local AWS mode's emulated Scheduler as unkind as
// EventBridge Scheduler may be: each one-time schedule fires anywhere from
// Early before to Late after its at() time, some fire twice, some never
// (their event dead-lettered). The zero value fires each schedule once, at
// its time.
type SchedulerFaults struct {
	// Early and Late bound the fire time around the schedule's at() time.
	// Scheduler's documented window is [at, at+59s]; a fault campaign uses
	// Early = precision - 1s and Late = precision, wider on both sides.
	Early, Late time.Duration
	// Twice is the fraction of schedules that fire a second time, later in
	// the same window.
	Twice float64
	// Drop is the fraction of schedules that never reach the target (their
	// event goes to the dead-letter queue).
	Drop float64
	// Seed makes the draws reproducible (0: random).
	Seed uint64
}

// FaultsFor returns the fault campaign for a Scheduler of precision p:
// early by up to p-1s, late by up to p, a fifth of the schedules twice and
// one in twenty dropped.
func FaultsFor(p time.Duration) SchedulerFaults {
	return SchedulerFaults{Early: p - time.Second, Late: p, Twice: 0.2, Drop: 0.05}
}

// emulatedScheduler fires the schedules of the group through the clock
// handler, as EventBridge Scheduler does in AWS, for emulators that store
// schedules but never fire them (LocalStack, moto), with the faults asked
// for.
type emulatedScheduler struct {
	rt     *Runtime
	faults SchedulerFaults
	rng    *rand.Rand
	// plans are the fire times drawn for each schedule seen, by name.
	plans map[string]*firePlan
	stats atomicStats
}

// SchedulerStats counts what the emulated Scheduler did.
type SchedulerStats struct {
	// Fired counts invocations of the clock handler; Schedules the
	// schedules fired at least once; Dropped those never fired (their
	// event dead-lettered).
	Fired, Schedules, Dropped int64
}

type atomicStats struct{ fired, schedules, dropped atomic.Int64 }

func (s *atomicStats) load() SchedulerStats {
	return SchedulerStats{Fired: s.fired.Load(), Schedules: s.schedules.Load(), Dropped: s.dropped.Load()}
}

// firePlan is what the emulated Scheduler does with one schedule: the fire
// times left, and how many it has made. A schedule's name stands for its
// content (the instant and the at() time), so it is read once.
type firePlan struct {
	fire  scheduler.Fire
	ok    bool
	left  []time.Time
	fired int
}

func newEmulatedScheduler(rt *Runtime, f SchedulerFaults) *emulatedScheduler {
	seed := f.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &emulatedScheduler{rt: rt, faults: f, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), plans: map[string]*firePlan{}}
}

func (e *emulatedScheduler) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)+1))
}

// plan draws the fire times of a schedule set for at.
func (e *emulatedScheduler) plan(at time.Time) []time.Time {
	f := e.faults
	if f.Drop > 0 && e.rng.Float64() < f.Drop {
		return nil
	}
	first := at.Add(e.uniform(-f.Early, f.Late))
	fires := []time.Time{first}
	if f.Twice > 0 && e.rng.Float64() < f.Twice {
		fires = append(fires, first.Add(e.uniform(0, at.Add(f.Late).Sub(first))))
	}
	return fires
}

// fire fires every planned fire whose time has come, and deletes each
// schedule after its last fire (ActionAfterCompletion DELETE) or, when
// dropped, once its window is over. It returns how many fires it made.
func (e *emulatedScheduler) fire(ctx context.Context, now time.Time) (int, error) {
	names, err := scheduler.ListNames(ctx, e.rt.Clock, now.Add(e.faults.Early))
	if err != nil {
		return 0, fmt.Errorf("list due schedules: %w", err)
	}
	seen := make(map[string]bool, len(names))
	n := 0
	for _, name := range names {
		seen[name] = true
		p, ok := e.plans[name]
		if !ok {
			f, ok, err := scheduler.ReadSchedule(ctx, e.rt.Clock, name)
			if err != nil {
				return n, err
			}
			p = &firePlan{fire: f, ok: ok}
			if ok {
				p.left = e.plan(f.At)
			}
			e.plans[name] = p
		}
		if !p.ok || p.fire.At.After(now.Add(e.faults.Early)) {
			continue // not ours, or its window has not opened
		}
		s := p.fire
		for len(p.left) > 0 && !p.left[0].After(now) {
			// Scheduler invokes the clock function.
			if err := e.rt.HandleClock(awsops.WithFunction(ctx, "clock"), s.Instant); err != nil {
				// Scheduler retries a failed invocation: fire again on
				// the next poll.
				return n, err
			}
			n++
			e.stats.fired.Add(1)
			if p.fired == 0 {
				e.stats.schedules.Add(1)
			}
			p.fired++
			p.left = p.left[1:]
		}
		// Deleted after its last fire, or, when dropped, once its window
		// is over (its event went to the dead-letter queue).
		if len(p.left) == 0 && (p.fired > 0 || !s.At.Add(e.faults.Late).After(now)) {
			if err := scheduler.DeleteName(ctx, e.rt.Clock, s.Name); err != nil {
				return n, err
			}
			if p.fired == 0 {
				e.stats.dropped.Add(1)
			}
			delete(e.plans, s.Name)
		}
	}
	// Schedules deleted by someone else (cancelled) are forgotten.
	for name := range e.plans {
		if !seen[name] {
			delete(e.plans, name)
		}
	}
	return n, nil
}

// queuePoller feeds the timer queue to the clock handler as Lambda's SQS
// event source mapping does: batches of up to 10 messages as an SQS event,
// deleting the messages not reported in batchItemFailures; a reported one
// becomes visible again after the visibility timeout. It short-polls
// (WaitTimeSeconds 0): the test emulator serves one request at a time.
type queuePoller struct {
	rt     *Runtime
	arn    string
	url    string
	handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}

// newQueuePoller polls the queue at url into handle (the timer queue into
// HandleTimerQueue, the grading queue into HandleGrading).
func newQueuePoller(ctx context.Context, rt *Runtime, url string, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) (*queuePoller, error) {
	arn, err := awsclient.SQSQueueARN(ctx, rt.SQS, url)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", url, err)
	}
	return &queuePoller{rt: rt, arn: arn, url: url, handle: handle}, nil
}

// poll receives and handles one batch; it returns the number of messages
// received.
func (p *queuePoller) poll(ctx context.Context) (int, error) {
	url := p.url
	msgs, err := awsclient.ReceiveSQS(ctx, p.rt.SQS, url, 10, 30)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	ev := events.SQSEvent{}
	receipts := map[string]string{}
	for _, m := range msgs {
		receipts[m.MessageID] = m.ReceiptHandle
		md5sum := m.MD5OfBody
		if md5sum == "" {
			sum := md5.Sum([]byte(m.Body))
			md5sum = hex.EncodeToString(sum[:])
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: m.Body,
			Md5OfBody: md5sum, Attributes: m.Attributes,
			MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource:       "aws:sqs", EventSourceARN: p.arn, AWSRegion: "us-east-1",
		})
	}
	resp, err := p.handle(ctx, ev)
	if err != nil {
		return len(msgs), err // the whole batch comes back
	}
	for _, f := range resp.BatchItemFailures {
		delete(receipts, f.ItemIdentifier)
	}
	var done []string
	for _, h := range receipts {
		done = append(done, h)
	}
	if len(done) > 0 {
		if err := awsclient.DeleteSQS(ctx, p.rt.SQS, url, done); err != nil {
			return len(msgs), fmt.Errorf("delete messages: %w", err)
		}
	}
	return len(msgs), nil
}
