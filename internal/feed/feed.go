// Package feed turns committed changes into their asynchronous effects: it
// schedules and cancels the instants of expectations on the clock, hands
// lapses to the outbox for delivery, and hands other record types to their
// own handlers (VERIFY for executions). The same Processor consumes the
// embedded store's feed (Run) and DynamoDB Stream records.
package feed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// Scheduler is the clock port: it arranges for each instant to reach the
// watcher (Service.Tick) at or after its time. Scheduling an instant twice,
// or cancelling one that is not scheduled, is not an error.
type Scheduler interface {
	Schedule(ctx context.Context, ins []expect.Instant) error
	Cancel(ctx context.Context, ins []expect.Instant) error
}

// Outbox accepts lapses whose task must be delivered.
type Outbox interface {
	Enqueue(agentID, expectationID string)
}

// Reanchorer re-anchors the dependents of a newly satisfied expectation
// and reports whether it had any.
type Reanchorer interface {
	ReanchorDependents(ctx context.Context, agentID, anchorID string, observedAt time.Time) (bool, error)
}

// TaskChecker withdraws a newly raised expectation whose origin task was
// canceled meanwhile (watcher.Service.WithdrawIfTaskCanceled).
type TaskChecker interface {
	WithdrawIfTaskCanceled(ctx context.Context, agentID, taskID, expectationID string) error
}

// Handler handles changes of one record type.
type Handler interface {
	HandleChange(ctx context.Context, ch store.Change) error
}

// Processor dispatches changes. It is idempotent: processing a change twice,
// or out of order with a later change of the same item, leaves the clock and
// outbox as processing it once would, because every effect is keyed and
// every consumer re-reads the record before acting.
type Processor struct {
	Scheduler Scheduler
	Outbox    Outbox
	// Watcher re-anchors dependents when an anchor is satisfied.
	Watcher Reanchorer
	// Tasks, when set, is asked about each newly raised expectation, so
	// one raised while its task's cancellation was under way is withdrawn.
	Tasks TaskChecker
	// Watches, when set, subscribes to the task each newly raised
	// expectation watches (watcher.Service.SubscribeWatch).
	Watches interface {
		SubscribeWatch(ctx context.Context, r *expect.Record) error
	}
	// Current, when set, reads an expectation's current record. Instants
	// are then scheduled from the record as it is now, not as the change
	// says it was, so a duplicate, replayed or out-of-order change never
	// re-creates an instant a later change removed.
	Current func(ctx context.Context, agentID, expectationID string) (*expect.Record, error)
	// CurrentItem, when set, is used instead of Current: it reads the
	// expectation's item, which is decoded only when it differs from the
	// change's new image (usually it is that image, already decoded). It
	// returns an error wrapping store.ErrNotFound when there is none.
	CurrentItem func(ctx context.Context, key store.Key) (store.Item, error)
	// Handlers maps other record types to their handlers.
	Handlers map[string]Handler
	// Alerts, when set, also sees every change once the change's own
	// processing succeeded (notify.Service: alert events become
	// notifications, notifications are handed to delivery). Its error
	// retries the change, which the rest handles idempotently.
	Alerts Handler
	// ScheduleAll hands the Scheduler every current instant of a changed
	// expectation, not only those the change added. A clock that holds
	// only a window of upcoming instants (the embedded timers.Window) needs
	// it: when an expectation's earlier instant passes, it learns of the
	// later ones, which it may not have held.
	ScheduleAll bool
	// Metrics observes each change's lag (its commit to the start of its
	// processing; nil: none), on the clock Now (default time.Now).
	Metrics metrics.Recorder
	Now     func() time.Time
	// Markers, when set, is the store whose effect markers (package
	// effects) the processor clears once a change that called for effects
	// has been processed; the sweep redoes those it does not clear.
	Markers store.Store
}

// Handle processes one change. An error means the change must be retried.
// A deletion by the store's own expiry (DynamoDB TTL: Change.Expired) is
// counted and otherwise ignored: it is no withdrawal or cancellation, and
// what the item was part of expired with it.
func (p *Processor) Handle(ctx context.Context, ch store.Change) error {
	if ch.Expired {
		if p.Metrics != nil {
			p.Metrics.Record(metrics.RecordsExpired, 1, ch.Type())
		}
		return nil
	}
	if p.Metrics != nil && !ch.At.IsZero() {
		now := time.Now()
		if p.Now != nil {
			now = p.Now()
		}
		p.Metrics.Record(metrics.FeedLag, max(0, now.Sub(ch.At).Seconds()))
	}
	// A clock that fails (Scheduler throttled) holds up no other effect:
	// its error retries the change after the alerts are made, which the
	// retry then finds made.
	var clockErr error
	reanchored := false
	if ch.Type() == watcher.TypeExpectation {
		var err error
		if reanchored, clockErr, err = p.expectation(ctx, ch); err != nil {
			return err
		}
	} else if h, ok := p.Handlers[ch.Type()]; ok {
		if err := h.HandleChange(ctx, ch); err != nil {
			return err
		}
	}
	if p.Alerts != nil {
		if err := p.Alerts.HandleChange(ctx, ch); err != nil {
			return err
		}
	}
	if clockErr != nil {
		return clockErr
	}
	return p.clearMarker(ctx, ch, reanchored)
}

// clearMarker clears the effect marker of a change that called for
// effects, now that they are done.
func (p *Processor) clearMarker(ctx context.Context, ch store.Change, reanchored bool) error {
	if p.Markers == nil || ch.New == nil {
		return nil
	}
	var old []byte
	if ch.Old != nil {
		old = ch.Old.Data
	}
	kinds := effects.Of(ch.Type(), old, ch.New.Data)
	if len(kinds) == 0 && !reanchored {
		return nil
	}
	return effects.Clear(ctx, p.Markers, ch.Key, ch.New.Version)
}

func decode(it *store.Item) (*expect.Record, error) {
	if it == nil {
		return nil, nil
	}
	return decodeView(*it)
}

// feedView is the part of an expectation record the feed reads: what
// expect.Instants, watcher.PendingDelivery, the re-anchoring check and the
// watched-task subscription (watcher.Service.SubscribeWatch) use.
// Decoding only it skips (without allocating) the rest of a record, which
// the feed would decode twice per change (old and new image) otherwise.
// A field those functions come to read must be added here;
// TestFeedViewAgreesWithRecord compares the two decodings.
type feedView struct {
	AgentID     string `json:"agentId"`
	TaskID      string `json:"taskId"`
	Expectation struct {
		ExpectationID string            `json:"expectationId"`
		Grace         string            `json:"grace"`
		Horizon       string            `json:"horizon"`
		WatchTask     *expect.WatchTask `json:"watchTask"`
	} `json:"expectation"`
	DueAt          string           `json:"dueAt"`
	State          expect.State     `json:"state"`
	PastDue        bool             `json:"pastDue"`
	ObservedAt     string           `json:"observedAt"`
	SatisfiedBy    *struct{}        `json:"satisfiedBy"`
	HorizonChecked bool             `json:"horizonChecked"`
	Delivery       *expect.Delivery `json:"delivery"`
	RaisedAt       string           `json:"raisedAt"`
}

// decodeView decodes an expectation item into a record holding only the
// fields of feedView.
func decodeView(it store.Item) (*expect.Record, error) {
	var v feedView
	if err := json.Unmarshal(it.Data, &v); err != nil {
		return nil, fmt.Errorf("decode expectation %s: %w", it.Key, err)
	}
	r := &expect.Record{AgentID: v.AgentID, TaskID: v.TaskID, DueAt: v.DueAt, State: v.State, PastDue: v.PastDue, ObservedAt: v.ObservedAt,
		HorizonChecked: v.HorizonChecked, Delivery: v.Delivery, RaisedAt: v.RaisedAt, Version: it.Version}
	r.Expectation.ExpectationID, r.Expectation.Grace, r.Expectation.Horizon = v.Expectation.ExpectationID, v.Expectation.Grace, v.Expectation.Horizon
	r.Expectation.WatchTask = v.Expectation.WatchTask
	if v.SatisfiedBy != nil {
		r.SatisfiedBy = &expect.Fact{}
	}
	return r, nil
}

func instants(r *expect.Record) []expect.Instant {
	if r == nil {
		return nil
	}
	return expect.Instants(r)
}

func minus(a, b []expect.Instant) []expect.Instant {
	var out []expect.Instant
	for _, x := range a {
		found := false
		for _, y := range b {
			if x.Kind == y.Kind && x.At.Equal(y.At) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

// expectation processes an expectation's change. It reports whether the
// change re-anchored dependents, and apart the clock's error, which the
// caller returns after the change's other effects.
func (p *Processor) expectation(ctx context.Context, ch store.Change) (reanchored bool, clockErr error, err error) {
	oldR, err := decode(ch.Old)
	if err != nil {
		return false, nil, err
	}
	newR, err := decode(ch.New)
	if err != nil {
		return false, nil, err
	}
	// Schedule what the record needs that its previous image did not
	// have; cancel what it no longer needs.
	add := minus(instants(newR), instants(oldR))
	del := minus(instants(oldR), instants(newR))
	if (p.Current != nil || p.CurrentItem != nil) && (newR != nil || oldR != nil) {
		ref := newR
		if ref == nil {
			ref = oldR
		}
		cur, err := p.current(ctx, ch, ref, newR)
		if err != nil {
			return false, nil, err
		}
		now := instants(cur)
		add = minus(now, instants(oldR))
		del = minus(append(instants(oldR), instants(newR)...), now)
		if p.ScheduleAll {
			add = now
		}
	} else if p.ScheduleAll {
		add = instants(newR)
	}
	// The domain's effects first: re-anchoring the dependents of a
	// satisfied anchor and queueing a lapse task depend on nothing but the
	// store, so a clock that keeps failing (Scheduler throttled for
	// minutes, until the record is retried out) cannot keep a met anchor's
	// dependents on their old due time. Both are idempotent, so the
	// retries of this change that a failing clock causes repeat them to no
	// effect; an instant left unscheduled is found by the clock's sweep.
	if p.Watcher != nil && newR != nil && newR.SatisfiedBy != nil && (oldR == nil || oldR.SatisfiedBy == nil) {
		observed, err := expect.ParseTime(newR.ObservedAt)
		if err != nil {
			return false, nil, fmt.Errorf("record %s/%s: observedAt: %w", newR.AgentID, newR.Expectation.ExpectationID, err)
		}
		if reanchored, err = p.Watcher.ReanchorDependents(ctx, newR.AgentID, newR.Expectation.ExpectationID, observed); err != nil {
			return false, nil, err
		}
	}
	if p.Tasks != nil && oldR == nil && newR != nil && newR.State == expect.StateOpen && newR.TaskID != "" {
		if err := p.Tasks.WithdrawIfTaskCanceled(ctx, newR.AgentID, newR.TaskID, newR.Expectation.ExpectationID); err != nil {
			return false, nil, err
		}
	}
	if p.Watches != nil && oldR == nil && newR != nil && newR.State == expect.StateOpen && newR.Expectation.WatchTask != nil {
		if err := p.Watches.SubscribeWatch(ctx, newR); err != nil {
			return false, nil, err
		}
	}
	if newR != nil && p.Outbox != nil && watcher.PendingDelivery(newR) {
		p.Outbox.Enqueue(newR.AgentID, newR.Expectation.ExpectationID)
	}
	if p.Scheduler != nil {
		if len(add) > 0 {
			if err := p.Scheduler.Schedule(ctx, add); err != nil {
				return reanchored, err, nil
			}
		}
		if len(del) > 0 {
			if err := p.Scheduler.Cancel(ctx, del); err != nil {
				return reanchored, err, nil
			}
		}
	}
	return reanchored, nil, nil
}

// current reads the expectation's record as it is now (nil when there is
// none), reusing newR when the stored item is the change's new image.
func (p *Processor) current(ctx context.Context, ch store.Change, ref, newR *expect.Record) (*expect.Record, error) {
	if p.CurrentItem == nil {
		cur, err := p.Current(ctx, ref.AgentID, ref.Expectation.ExpectationID)
		if err != nil && !errs.Is(err, errs.NotFound) {
			return nil, err
		}
		return cur, nil
	}
	it, err := p.CurrentItem(ctx, ch.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ch.New != nil && it.Version == ch.New.Version && bytes.Equal(it.Data, ch.New.Data) {
		return newR, nil
	}
	return decodeView(it)
}

// Run consumes an embedded feed until ctx ends: it reads changes in order,
// processes each (retrying a failing change with backoff, so nothing is
// skipped), and acknowledges them durably only after they were processed.
// A crash therefore replays at most the unacknowledged tail, which the
// Processor handles idempotently.
func Run(ctx context.Context, fr store.FeedReader, p ChangeHandler, log *slog.Logger) error {
	return RunWith(ctx, fr, p, log, Options{})
}

// Options bound how long Run holds the changes behind one that fails.
type Options struct {
	// MaxAttempts of one change before it is set aside (0: retried until
	// it applies, the changes behind it waiting).
	MaxAttempts int
	// SetAside keeps a change given up on, with the reason (SetAsideInStore
	// on the embedded store); it is called until it succeeds.
	SetAside func(ctx context.Context, ch store.Change, cause error) error
	// Lanes handles the changes of different items side by side, each
	// item's changes in order in one lane, as DynamoDB Streams' shards and
	// Lambda's parallelization factor do (0 or 1: one change at a time).
	// The handlers are safe for it: they run so on AWS.
	Lanes int
}

// DefaultMaxAttempts is how often the embedded runtime tries a change
// (about 25 s of backoff in all) before setting it aside.
const DefaultMaxAttempts = 10

// DefaultLanes is the embedded runtime's Options.Lanes: enough for one
// item's slow handler (a VERIFY waiting for its commit) not to hold up the
// others, and for the commits of several to share one write to disk.
const DefaultLanes = 8

// RunWith is Run that sets aside a change still failing after
// opt.MaxAttempts, so that one poisoned change does not block every
// change behind it: the changes after it are applied, and the instants it
// would have scheduled are found by the timers' sweep.
func RunWith(ctx context.Context, fr store.FeedReader, p ChangeHandler, log *slog.Logger, opt Options) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changes, err := fr.ReadFeed(ctx, 2048)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error("feed read failed", "err", err)
			if !sleep(ctx, time.Second) {
				return nil
			}
			continue
		}
		if len(changes) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-fr.FeedSignal():
			case <-tick.C:
			}
			continue
		}
		if !handleAll(ctx, changes, p, log, opt) {
			return nil
		}
		if err := fr.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("feed ack failed", "err", err)
		}
	}
}

// handleAll applies changes, in lanes by item (Options.Lanes), each change
// retried until it applies or is set aside. It returns false when ctx ended
// first.
func handleAll(ctx context.Context, changes []store.Change, p ChangeHandler, log *slog.Logger, opt Options) bool {
	if opt.Lanes <= 1 || len(changes) == 1 {
		for _, ch := range changes {
			if !handleOne(ctx, ch, p, log, opt) {
				return false
			}
		}
		return true
	}
	lanes := make([][]store.Change, opt.Lanes)
	for _, ch := range changes {
		h := fnv.New32a()
		_, _ = h.Write([]byte(ch.Key.PK))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(ch.Key.SK))
		i := h.Sum32() % uint32(opt.Lanes)
		lanes[i] = append(lanes[i], ch)
	}
	var wg sync.WaitGroup
	var stopped atomic.Bool
	for _, lane := range lanes {
		if len(lane) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, ch := range lane {
				if !handleOne(ctx, ch, p, log, opt) {
					stopped.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return !stopped.Load()
}

// handleOne applies ch, retrying with backoff, and sets it aside after
// opt.MaxAttempts. It returns false when ctx ended first.
func handleOne(ctx context.Context, ch store.Change, p ChangeHandler, log *slog.Logger, opt Options) bool {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := p.Handle(ctx, ch)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if opt.MaxAttempts > 0 && attempt >= opt.MaxAttempts && opt.SetAside != nil {
			return setAside(ctx, opt.SetAside, ch, err, log)
		}
		log.Error("feed change failed; retrying", "seq", ch.Seq, "key", ch.Key.String(), "attempt", attempt, "err", err)
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// setAside keeps ch with fn until that succeeds or ctx ends (false).
func setAside(ctx context.Context, fn func(context.Context, store.Change, error) error, ch store.Change, cause error, log *slog.Logger) bool {
	for {
		err := fn(ctx, ch, cause)
		if err == nil {
			log.Error("feed change set aside after its retries; the changes behind it go on", "seq", ch.Seq, "key", ch.Key.String(), "type", ch.Type(), "err", cause)
			return true
		}
		log.Error("setting a feed change aside failed; retrying", "seq", ch.Seq, "err", err)
		if !sleep(ctx, time.Second) {
			return false
		}
	}
}

// TypeSetAside is the type of the item that keeps a change the feed set
// aside (SetAsideInStore).
const TypeSetAside = "feedsetaside"

// SetAsideRecord is what is kept of a change set aside: which change, and
// why.
type SetAsideRecord struct {
	Seq    string    `json:"seq"`
	Key    store.Key `json:"key"`
	Type   string    `json:"type"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// SetAsideKey is where the change of seq (the feed's position, which
// sorts) is kept: one partition, in feed order, for operators to list
// (store.Query with PK SetAsidePK).
func SetAsideKey(seq string) store.Key {
	return store.Key{PK: SetAsidePK, SK: store.KeyPart(seq)}
}

// SetAsidePK is the partition of the changes set aside.
const SetAsidePK = "FEEDSETASIDE"

// SetAsideInStore returns an Options.SetAside that keeps the change in st
// (an item of type TypeSetAside, whose own change the Processor ignores)
// for retain (zero: forever; the server passes -retain-expectations, so
// operators have as long to read it as the records it concerns are kept)
// and counts it (metrics.FeedSetAside).
func SetAsideInStore(st store.Store, rec metrics.Recorder, now func() time.Time, retain time.Duration) func(context.Context, store.Change, error) error {
	rec = metrics.Or(rec)
	return func(ctx context.Context, ch store.Change, cause error) error {
		b, err := json.Marshal(SetAsideRecord{Seq: ch.Seq, Key: ch.Key, Type: ch.Type(), Reason: cause.Error(), At: now().UTC()})
		if err != nil {
			return err
		}
		it := store.Item{Key: SetAsideKey(ch.Seq), Type: TypeSetAside, Data: b}
		if retain > 0 {
			it.ExpiresAt = now().Add(retain).Unix()
		}
		if err := st.Commit(ctx, []store.Write{{Put: &it}}); err != nil {
			return err
		}
		rec.Record(metrics.FeedSetAside, 1)
		return nil
	}
}

// RetrySetAside handles again each change set aside in st
// (SetAsideInStore), at most limit: as a change from nothing to its item as
// it is now (which every effect handles idempotently; nothing, when the
// item is gone), and removes its record once that succeeds. A change that
// still fails stays for the next call. It returns how many it redid, and
// the first failure.
func RetrySetAside(ctx context.Context, st store.Store, handle func(context.Context, store.Change) error, limit int) (int, error) {
	p, err := st.Query(ctx, store.Query{PK: SetAsidePK, Limit: min(limit, store.MaxLimit)})
	if err != nil {
		return 0, err
	}
	done := 0
	var first error
	for _, it := range p.Items {
		var rec SetAsideRecord
		if err := json.Unmarshal(it.Data, &rec); err != nil {
			continue
		}
		if err := effects.Redo(ctx, st, rec.Key, handle); err != nil {
			first = cmp.Or(first, fmt.Errorf("change %s of %s set aside: %w", rec.Seq, rec.Key, err))
			continue
		}
		key := it.Key
		if err := st.Commit(ctx, []store.Write{{Delete: &key}}); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		done++
	}
	return done, first
}

// ChangeHandler processes one change; an error means retry it.
type ChangeHandler interface {
	Handle(ctx context.Context, ch store.Change) error
}

// Drain processes every change currently in the feed and returns; used at
// shutdown and in tests.
func Drain(ctx context.Context, fr store.FeedReader, p ChangeHandler) error {
	for {
		changes, err := fr.ReadFeed(ctx, 2048)
		if err != nil || len(changes) == 0 {
			return err
		}
		for _, ch := range changes {
			if err := p.Handle(ctx, ch); err != nil {
				return err
			}
		}
		if err := fr.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
