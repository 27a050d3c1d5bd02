// Package outbox delivers lapse tasks. A lapse is committed first (the
// record is the outbox entry, indexed while undelivered); delivery happens
// after, at least once, retried by retry.Policy (a day by default, so that
// an agent that is redeployed, failed over or down for a weekend's night
// still gets its task when it is back), and every attempt of one lapse
// carries the same messageId, so the agent can tell a retry from a new
// lapse. Attempts to an agent that is down are paced by its circuit (one
// probe at a time; the others wait for it, holding no worker). A failure a
// retry cannot mend, or the end of the window, dead-letters the record,
// where an operator can list and replay it.
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/breaker"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// Sender sends one lapse task and returns the task id the agent created.
type Sender interface {
	Send(ctx context.Context, card expect.Card, m a2aout.Message) (string, error)
}

// DescribingSender is a Sender that says what a record may keep of a
// failed send (*a2aout.Sender: the class of the failure, never the remote's
// own text); other senders' errors are kept as they are.
type DescribingSender interface {
	Describe(err error) string
}

// ReportingSender is a Sender that also reports whether the agent
// activated the extension (*a2aout.Sender); the outbox records it as
// delivery.activated.
type ReportingSender interface {
	SendLapse(ctx context.Context, card expect.Card, m a2aout.Message) (a2aout.Outcome, error)
}

// Options tune delivery.
type Options struct {
	// RetryFor is how long failed deliveries are retried, from the first
	// failure, before they are dead-lettered (default retry.DefaultFor, a
	// day).
	RetryFor time.Duration
	// MaxAttempts, when positive, also dead-letters a lapse after that
	// many sends (default 0: the window alone).
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the waits between attempts (see
	// retry.Policy: defaults 1s and 1h).
	BaseBackoff, MaxBackoff time.Duration
	// SendToTimekeepers sends lapse tasks even to agents whose card says
	// keepsTime: true (default false: their lapses are recorded only).
	SendToTimekeepers bool
	// Workers delivering concurrently (default 8).
	Workers int
	// AttemptTimeout bounds one send (default 10s).
	AttemptTimeout time.Duration
	// Metrics counts attempts, failures and dead letters as each outcome
	// is committed on its record (nil: none).
	Metrics metrics.Recorder
	// ClaimSends has each attempt claim its send in the store first
	// (watcher.ClaimDelivery), so that attempts of one lapse made by
	// different processes at once (on AWS, a duplicated stream record or
	// timer message reaching two function instances) send it once. In one
	// process attempts never overlap without it; it costs a small write
	// and a read per attempt.
	ClaimSends bool
	// Silenced, when set, names the silence that holds back rec's lapse
	// task now ("" for none): such a lapse is recorded as suppressed by it
	// instead of sent (notify.Service.SilencedLapseTask).
	Silenced func(ctx context.Context, rec *expect.Record) (string, error)
}

type job struct{ agent, id string }

// Policy is the retry policy the options describe.
func (o Options) Policy() retry.Policy {
	return retry.Policy{For: o.RetryFor, Base: o.BaseBackoff, Ceiling: o.MaxBackoff, MaxAttempts: o.MaxAttempts}.WithDefaults()
}

type jobState int

const (
	queued jobState = iota + 1
	inFlight
	inFlightAgain
)

// Outbox is the delivery worker pool.
type Outbox struct {
	svc    *watcher.Service
	sender Sender
	opt    Options
	log    *slog.Logger

	mu sync.Mutex
	// pending holds queued and in-flight jobs; a job enqueued while in
	// flight is marked to run again, so one record never has two attempts
	// at once.
	pending map[job]jobState
	queue   chan job
	// attempting holds the records an Attempt is sending right now, in
	// this process: a second Attempt of one of them (a duplicated stream
	// record or timer message on AWS, where Attempt is called directly)
	// leaves it to the first, which records the outcome and asks for its
	// own retry.
	attempting map[job]bool
	// wakeAt holds when each waiting record's timer fires (embedded Run),
	// so that the sweep and the feed asking again for a record that waits
	// do not stack up timers.
	wakeAt map[job]time.Time

	policy   retry.Policy
	circuits *breaker.Breakers
}

// New returns an outbox; call Run to start it.
func New(svc *watcher.Service, sender Sender, opt Options, log *slog.Logger) *Outbox {
	if opt.Workers <= 0 {
		opt.Workers = 32
	}
	if opt.AttemptTimeout <= 0 {
		opt.AttemptTimeout = 10 * time.Second
	}
	opt.Metrics = metrics.Or(opt.Metrics)
	policy := opt.Policy()
	return &Outbox{svc: svc, sender: sender, opt: opt, log: log, pending: map[job]jobState{}, queue: make(chan job, 65536), attempting: map[job]bool{},
		wakeAt: map[job]time.Time{}, policy: policy,
		circuits: breaker.New(svc.Store(), svc.Now, policy, opt.AttemptTimeout+probeMargin)}
}

// Enqueue asks for the lapse task of one record to be delivered. Enqueuing
// a record already queued, delivered or not lapsed is harmless.
func (o *Outbox) Enqueue(agentID, expectationID string) {
	j := job{agentID, expectationID}
	o.mu.Lock()
	switch o.pending[j] {
	case queued, inFlightAgain:
		o.mu.Unlock()
		return
	case inFlight:
		o.pending[j] = inFlightAgain
		o.mu.Unlock()
		return
	}
	o.pending[j] = queued
	o.mu.Unlock()
	select {
	case o.queue <- j:
	default:
		// Queue full: the record stays in the outbox index and is picked up
		// by the next Recover.
		o.mu.Lock()
		delete(o.pending, j)
		o.mu.Unlock()
	}
}

// Recover enqueues every lapse whose task is still undelivered (after a
// restart, or to sweep what a full queue dropped).
func (o *Outbox) Recover(ctx context.Context) error {
	return o.svc.ForEachOutbox(ctx, func(r *expect.Record) error {
		o.Enqueue(r.AgentID, r.Expectation.ExpectationID)
		return nil
	})
}

// Run delivers until ctx ends, then waits for attempts in flight.
func (o *Outbox) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < o.opt.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-o.queue:
					o.mu.Lock()
					o.pending[j] = inFlight
					o.mu.Unlock()
					retry, again := o.Attempt(ctx, j.agent, j.id)
					o.mu.Lock()
					rerun := o.pending[j] == inFlightAgain
					delete(o.pending, j)
					o.mu.Unlock()
					if rerun && !again {
						o.Enqueue(j.agent, j.id)
					}
					if again && ctx.Err() == nil {
						o.later(ctx, j, retry)
					}
				}
			}
		}()
	}
	sweep := time.NewTicker(30 * time.Second)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-sweep.C:
			if err := o.Recover(ctx); err != nil && ctx.Err() == nil {
				o.log.Error("outbox sweep failed", "err", err)
			}
		}
	}
}

// probeMargin is what a circuit's probe holds beyond the attempt's
// timeout: the time to record its outcome.
const probeMargin = 2 * time.Second

// later enqueues j after d, unless a timer for j fires no later than that
// already: a record that waits hours is asked for by every sweep and by
// the change of its own record, and one timer is enough.
func (o *Outbox) later(ctx context.Context, j job, d time.Duration) {
	at := time.Now().Add(d)
	o.mu.Lock()
	if cur, ok := o.wakeAt[j]; ok && !cur.After(at) {
		o.mu.Unlock()
		return
	}
	o.wakeAt[j] = at
	o.mu.Unlock()
	time.AfterFunc(d, func() {
		o.mu.Lock()
		if o.wakeAt[j].Equal(at) {
			delete(o.wakeAt, j)
		}
		o.mu.Unlock()
		if ctx.Err() == nil {
			o.Enqueue(j.agent, j.id)
		}
	})
}

// storeRetry is how soon an attempt whose store read or write failed is
// tried again.
func (o *Outbox) storeRetry() time.Duration { return o.policy.Base }

// Attempt makes one delivery attempt for a record and reports whether (and
// after how long) to try again. While the agent's circuit is open and this
// attempt is not its probe, it sends nothing and records when to come back
// (after the probe). While one Attempt of a record runs in this process,
// another of the same record does nothing (and asks for no retry): the
// running one records the outcome and asks for its own; with
// Options.ClaimSends, so does one in another process.
func (o *Outbox) Attempt(ctx context.Context, agentID, id string) (time.Duration, bool) {
	j := job{agentID, id}
	o.mu.Lock()
	busy := o.attempting[j]
	o.attempting[j] = true
	o.mu.Unlock()
	if busy {
		return 0, false
	}
	defer func() {
		o.mu.Lock()
		delete(o.attempting, j)
		o.mu.Unlock()
	}()
	rec, err := o.svc.Get(ctx, agentID, id)
	if err != nil || !watcher.PendingDelivery(rec) {
		return 0, false
	}
	if wait := o.NotBefore(rec); wait > 0 {
		return wait, true
	}
	card, err := o.svc.Card(ctx, agentID)
	if err != nil {
		return o.fail(ctx, rec, fmt.Errorf("agent card unavailable: %w", err), retry.Failure{Class: retry.Misconfigured})
	}
	silence := ""
	if o.opt.Silenced != nil {
		if silence, err = o.opt.Silenced(ctx, rec); err != nil {
			return o.storeRetry(), true
		}
	}
	if silence != "" || card.Declaration.KeepsTime && !o.opt.SendToTimekeepers {
		_, err := o.svc.UpdateRecord(ctx, agentID, id, func(r *expect.Record) (*expect.Record, bool, error) {
			if !watcher.PendingDelivery(r) {
				return r, false, nil
			}
			r.Delivery.Suppressed, r.Delivery.SilencedBy = true, silence
			return r, true, nil
		})
		if err != nil {
			return o.storeRetry(), true
		}
		return 0, false
	}
	// The circuit before the claim: a wait is recorded on the record
	// (a conditional write of its own) and claims nothing.
	circuit := watcher.CircuitKey(agentID)
	adm, until, err := o.circuits.Admit(ctx, circuit, rec.Delivery.MessageID)
	if err != nil {
		return o.storeRetry(), true
	}
	if adm.Admission == retry.Wait {
		return o.park(ctx, rec, until)
	}
	if o.opt.ClaimSends {
		held, err := o.svc.ClaimDelivery(ctx, rec, o.opt.AttemptTimeout+store.ClaimMargin)
		if err != nil {
			return o.storeRetry(), true
		}
		if !held {
			return 0, false // another process's attempt, which records its outcome
		}
	}
	msg := a2aout.Message{
		MessageID:       rec.Delivery.MessageID,
		ContextID:       rec.ContextID,
		ReferenceTaskID: rec.TaskID,
		Skill:           card.Declaration.LapseSkill,
		Lapse:           *rec.Lapse,
		Text: fmt.Sprintf("Expectation %s (%s) on %s %s lapsed: %s. It expected: %s",
			rec.Expectation.ExpectationID, rec.Expectation.Kind, rec.Expectation.Subject.Type,
			rec.Expectation.Subject.ID, rec.Lapse.Lapse, rec.Expectation.Expects),
	}
	actx, cancel := context.WithTimeout(ctx, o.opt.AttemptTimeout)
	var taskID string
	var activated *bool
	var sendErr error
	if rs, ok := o.sender.(ReportingSender); ok {
		var out a2aout.Outcome
		out, sendErr = rs.SendLapse(actx, card, msg)
		taskID, activated = out.TaskID, &out.Activated
	} else {
		taskID, sendErr = o.sender.Send(actx, card, msg)
	}
	cancel()
	if sendErr != nil {
		f := o.classify(sendErr)
		if err := o.circuits.Failed(ctx, circuit, "agent:"+agentID, adm, f); err != nil {
			o.log.Error("recording the agent's circuit failed", "agent", agentID, "err", err)
		}
		return o.fail(ctx, rec, sendErr, f)
	}
	if err := o.circuits.Succeeded(ctx, circuit, adm); err != nil {
		o.log.Error("closing the agent's circuit failed", "agent", agentID, "err", err)
	}
	now := expect.FormatTime(o.svc.Now())
	recorded := false
	_, err = o.svc.UpdateRecord(ctx, agentID, id, func(r *expect.Record) (*expect.Record, bool, error) {
		recorded = false
		if r.Delivery == nil || r.Delivery.DeliveredAt != "" {
			return r, false, nil
		}
		recorded = true
		r.LapseTaskID = taskID
		r.Delivery.Attempts++
		r.Delivery.DeliveredAt = now
		r.Delivery.LastError, r.Delivery.LastErrorClass, r.Delivery.WaitingForProbe = "", "", false
		r.Delivery.DeadLettered = false
		r.Delivery.Activated = activated
		return r, true, nil
	})
	if err != nil {
		// Delivered but not recorded: the retry re-sends the same messageId.
		o.log.Error("lapse delivered but not recorded", "agent", agentID, "expectation", id, "err", err)
		return o.storeRetry(), true
	}
	if recorded {
		o.opt.Metrics.Record(metrics.DeliveryAttempts, 1)
	}
	o.log.Info("lapse delivered", "agent", agentID, "expectation", id, "lapse", rec.Lapse.Lapse, "messageId", msg.MessageID, "lapseTaskId", taskID)
	return 0, false
}

// describe is what the record keeps of a failed send (the logs keep all).
func (o *Outbox) describe(err error) string {
	if d, ok := o.sender.(DescribingSender); ok {
		return d.Describe(err)
	}
	return err.Error()
}

// classify is the class of a failed send (a2aout.Classify for the real
// sender; other senders' errors are transient unless they say otherwise).
func (o *Outbox) classify(err error) retry.Failure {
	return a2aout.Classify(err)
}

func (o *Outbox) fail(ctx context.Context, rec *expect.Record, cause error, f retry.Failure) (time.Duration, bool) {
	var attempts int
	var dead, recorded bool
	var next time.Time
	now := o.svc.Now()
	_, err := o.svc.UpdateRecord(ctx, rec.AgentID, rec.Expectation.ExpectationID, func(r *expect.Record) (*expect.Record, bool, error) {
		recorded = false
		if !watcher.PendingDelivery(r) {
			return r, false, nil
		}
		recorded = true
		d := r.Delivery
		d.Attempts++
		d.LastError = truncate(o.describe(cause), 512)
		d.LastErrorClass = string(f.Class)
		d.WaitingForProbe = false
		since := failingSince(d, now)
		d.FailingSince = expect.FormatTime(since)
		decision := o.policy.AfterFailure(d.MessageID, d.Attempts, since, now, f)
		d.DeadLettered = decision.Dead
		d.NextAttemptAt = ""
		if !decision.Dead {
			d.NextAttemptAt = expect.FormatTime(decision.Next)
		}
		attempts, dead, next = d.Attempts, d.DeadLettered, decision.Next
		return r, true, nil
	})
	if err != nil {
		return o.storeRetry(), true
	}
	if recorded {
		o.opt.Metrics.Record(metrics.DeliveryAttempts, 1)
		o.opt.Metrics.Record(metrics.DeliveryFailures, 1)
		if dead {
			o.opt.Metrics.Record(metrics.DeadLetters, 1)
		}
	}
	if dead {
		o.log.Warn("lapse dead-lettered", "agent", rec.AgentID, "expectation", rec.Expectation.ExpectationID, "attempts", attempts, "class", f.Class, "permanent", f.Permanent, "err", cause)
		return 0, false
	}
	if !recorded {
		return 0, false
	}
	o.log.Info("lapse delivery failed; will retry", "agent", rec.AgentID, "expectation", rec.Expectation.ExpectationID, "attempts", attempts, "class", f.Class, "next", next, "err", cause)
	return max(0, next.Sub(now)), true
}

// park records that a record's next attempt waits for the agent's circuit
// until until (capped at the end of its retry window), without counting an
// attempt; a record whose window has closed while it waited is
// dead-lettered.
func (o *Outbox) park(ctx context.Context, rec *expect.Record, until time.Time) (time.Duration, bool) {
	now := o.svc.Now()
	var dead, recorded bool
	next := until
	_, err := o.svc.UpdateRecord(ctx, rec.AgentID, rec.Expectation.ExpectationID, func(r *expect.Record) (*expect.Record, bool, error) {
		recorded = false
		if !watcher.PendingDelivery(r) {
			return r, false, nil
		}
		recorded = true
		d := r.Delivery
		since := failingSince(d, now)
		d.FailingSince = expect.FormatTime(since)
		if o.policy.Expired(since, now) {
			d.DeadLettered, d.NextAttemptAt, d.WaitingForProbe = true, "", false
			if d.LastError == "" {
				d.LastError = "the agent was down (its circuit open) for the whole retry window"
			}
			dead = true
			return r, true, nil
		}
		if end := since.Add(o.policy.For); next.After(end) {
			next = end
		}
		d.NextAttemptAt, d.WaitingForProbe = expect.FormatTime(next), true
		return r, true, nil
	})
	if err != nil {
		return o.storeRetry(), true
	}
	if !recorded {
		return 0, false
	}
	if dead {
		o.opt.Metrics.Record(metrics.DeadLetters, 1)
		o.log.Warn("lapse dead-lettered: the agent stayed down", "agent", rec.AgentID, "expectation", rec.Expectation.ExpectationID)
		return 0, false
	}
	return max(0, next.Sub(now)), true
}

// failingSince is when d's run of failures began (now for the first).
func failingSince(d *expect.Delivery, now time.Time) time.Time {
	if t, err := expect.ParseTime(d.FailingSince); err == nil && d.FailingSince != "" {
		return t
	}
	return now
}

// NotBefore returns how long a record's next delivery attempt must wait
// (the backoff after its last failure), or zero.
func (o *Outbox) NotBefore(rec *expect.Record) time.Duration {
	if rec.Delivery == nil || rec.Delivery.NextAttemptAt == "" {
		return 0
	}
	t, err := expect.ParseTime(rec.Delivery.NextAttemptAt)
	if err != nil {
		return 0
	}
	return max(0, t.Sub(o.svc.Now()))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
