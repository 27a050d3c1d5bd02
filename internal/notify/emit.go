package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// The record types whose changes HandleChange reads (besides its own
// notifications); the feed and the AWS stream filter route them here.
const (
	typeExpectation  = "expectation"
	typeVerification = "verification"
)

// HandledTypes are the item types HandleChange acts on.
var HandledTypes = []string{typeExpectation, typeVerification, TypeNotification}

// HandleChange processes one committed change (a feed.Handler): an
// expectation or VERIFY change that is an alert event becomes one
// notification per matching rule and channel (created once: a replayed
// change finds them made); a notification waiting for delivery is handed
// to the Enqueuer. An error means the change must be retried.
func (s *Service) HandleChange(ctx context.Context, ch store.Change) error {
	switch ch.Type() {
	case TypeNotification:
		return s.notificationChanged(ctx, ch)
	case typeExpectation:
		occs, err := expectationOccurrences(ch)
		if err != nil {
			return err
		}
		if len(occs) > 0 {
			if err := s.emit(ctx, occs); err != nil {
				return err
			}
		}
		return s.reminders(ctx, ch)
	case typeVerification:
		occs, err := verificationOccurrences(ch)
		if err != nil || len(occs) == 0 {
			return err
		}
		return s.emit(ctx, occs)
	}
	return nil
}

// transitions is the part of an expectation record that says whether a
// change can be an alert event, decoded before the whole record is.
type transitions struct {
	Lapse       *struct{} `json:"lapse"`
	Ack         *struct{} `json:"ack"`
	SatisfiedBy *struct{} `json:"satisfiedBy"`
	Delivery    *struct {
		DeadLettered bool `json:"deadLettered"`
	} `json:"delivery"`
}

func (t transitions) dead() bool { return t.Delivery != nil && t.Delivery.DeadLettered }

// lapseKey is in an expectation record's JSON exactly when it has lapsed
// (omitempty): every alert event of an expectation needs a lapse, so a
// change without it (a raise, a fact on an open one) is passed over
// without decoding, on the feed's hot path.
var lapseKey = []byte(`"lapse":`)

func expectationOccurrences(ch store.Change) ([]alert.Occurrence, error) {
	if ch.New == nil || !bytes.Contains(ch.New.Data, lapseKey) {
		return nil, nil
	}
	var o, n transitions
	if ch.Old != nil {
		_ = json.Unmarshal(ch.Old.Data, &o)
	}
	if err := json.Unmarshal(ch.New.Data, &n); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	lapsed := n.Lapse != nil && o.Lapse == nil
	recovered := n.Lapse != nil && n.SatisfiedBy != nil && o.SatisfiedBy == nil
	dead := n.dead() && !o.dead()
	acked := n.Lapse != nil && n.Ack != nil && o.Ack == nil
	if !lapsed && !recovered && !dead && !acked {
		return nil, nil
	}
	var cur expect.Record
	if err := json.Unmarshal(ch.New.Data, &cur); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	var old *expect.Record
	if ch.Old != nil {
		old = &expect.Record{}
		if err := json.Unmarshal(ch.Old.Data, old); err != nil {
			old = nil
		}
	}
	return alert.FromExpectation(old, &cur, ch.New.Data), nil
}

// verificationView is the part of a VERIFY item the check reads first.
type verificationView struct {
	Verification struct {
		Verdict anticipate.Verdict `json:"verdict"`
	} `json:"verification"`
}

func verificationOccurrences(ch store.Change) ([]alert.Occurrence, error) {
	if ch.New == nil {
		return nil, nil
	}
	var o, n verificationView
	if ch.Old != nil {
		_ = json.Unmarshal(ch.Old.Data, &o)
	}
	if err := json.Unmarshal(ch.New.Data, &n); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	if !n.Verification.Verdict.Final() || o.Verification.Verdict.Final() {
		return nil, nil
	}
	var full struct {
		Verification json.RawMessage `json:"verification"`
	}
	if err := json.Unmarshal(ch.New.Data, &full); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	var v anticipate.Verification
	if err := json.Unmarshal(full.Verification, &v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ch.Key, err)
	}
	return alert.FromVerification(o.Verification.Verdict, &v, full.Verification), nil
}

// emit creates the notifications of occs by their agent's rules.
func (s *Service) emit(ctx context.Context, occs []alert.Occurrence) error {
	agent := occs[0].Event.Data.AgentID
	rules, err := s.Rules(ctx, agent)
	if err != nil {
		return err
	}
	for _, occ := range occs {
		for _, r := range rules.Rules {
			if occ.Event.Type == alert.VerificationCompleted && slices.Contains(r.On, alert.PassRateBelow) {
				if err := s.passRate(ctx, agent, rules.ByOperator, r, occ); err != nil {
					return err
				}
				continue
			}
			if !r.Matches(occ) {
				continue
			}
			if err := s.create(ctx, agent, rules.ByOperator, r, occ); err != nil {
				return err
			}
		}
		// The operator's scores channel, for every agent (a rule of the
		// operator's, so it must be the operator's channel).
		if s.opt.ScoresChannel != "" && occ.Event.Type == alert.VerificationCompleted {
			r := alert.Rule{On: []alert.EventType{alert.VerificationCompleted}, Channels: []string{s.opt.ScoresChannel}}
			if err := s.create(ctx, agent, true, r, occ); err != nil {
				return err
			}
		}
	}
	return nil
}

// create commits the notifications of one occurrence under one rule, with
// the rule's cooldown decided in the same commit.
func (s *Service) create(ctx context.Context, agent string, byOperator bool, r alert.Rule, occ alert.Occurrence) error {
	now := s.opt.Now()
	ruleID := r.ID()
	dedup := alert.DedupKey(agent, "E#"+occ.About.ExpectationID)
	switch {
	case occ.Incident != "":
		dedup = alert.DedupKey(agent, occ.Incident)
	case occ.About.ExpectationID == "":
		dedup = alert.DedupKey(agent, "V#"+occ.Key)
	}
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		heldBack := 0
		// An acknowledgement follows a lapse already sent (or held back):
		// a person's action, never a flood, and the incident it updates
		// must not stay unacknowledged for the window. A reminder is made
		// long before it is sent: it must not take the window from what
		// happens now.
		if d := r.CooldownOf(); d > 0 && occ.Event.Type != alert.Acknowledged && occ.Event.Type != alert.DueSoon {
			key := cooldownKey(agent, ruleID)
			it, ok, err := tx.Get(ctx, key)
			if err != nil {
				return err
			}
			var cd alert.Cooldown
			if ok {
				_ = json.Unmarshal(it.Data, &cd)
			}
			send, held, changed := cd.Admit(occ.Key, d, now)
			if changed {
				b, _ := json.Marshal(cd)
				cdItem := store.Item{Key: key, Type: TypeCooldown, Data: b}
				if s.opt.Retain > 0 {
					// It outlives its window by the retention, then goes: a
					// rule edited or removed leaves none behind for good.
					cdItem.ExpiresAt = expect.ExpiryTime(now, d+s.opt.Retain).Unix()
				}
				tx.Put(cdItem)
			}
			if !send {
				if changed {
					s.opt.Metrics.Record(metrics.NotificationsHeld, 1)
				}
				return nil
			}
			heldBack = held
		}
		// stage adds the notification made of occ for channel chID (once:
		// a replayed change finds it made), unless the channel no longer
		// serves the agent; follow is what makes it a follow-up.
		stage := func(chID, key string, follow func(*alert.Notification)) error {
			// The channel as it is now: a channel deleted, or deleted and
			// taken by someone it does not serve, gets nothing (its
			// owner would otherwise see this agent's events).
			cit, ok, err := tx.Get(ctx, channelKey(chID))
			if err != nil {
				return err
			}
			var c storedChannel
			if ok {
				err = json.Unmarshal(cit.Data, &c)
			}
			if !ok || err != nil || !c.Serves(agent, byOperator) {
				s.log.Warn("alert rule names a channel that does not serve the agent; skipped", "agent", agent, "channel", chID)
				return nil
			}
			id := alert.NotificationID(key, ruleID, chID)
			_, exists, err := tx.Get(ctx, notificationKey(agent, id))
			if err != nil || exists {
				return err // exists: a replayed change, made already
			}
			n := &alert.Notification{ID: id, AgentID: agent, ChannelID: chID, ChannelType: c.Type, ChannelIncarnation: c.Incarnation,
				Event: occ.Event, About: occ.About, DedupKey: dedup, CreatedAt: expect.FormatTime(now), ByOperator: byOperator}
			n.Event.Data.HeldBack = heldBack
			if follow != nil {
				follow(n)
			}
			it, err := notificationItem(n, s.opt.Retain)
			if err != nil {
				return err
			}
			tx.Put(it)
			return nil
		}
		for _, chID := range r.Channels {
			err := stage(chID, occ.Key, func(n *alert.Notification) {
				switch {
				case occ.Event.Type == alert.Lapsed && r.Repeat != nil:
					n.Repeats = &alert.RepeatState{Every: r.Repeat.Every, Max: r.Repeat.Max}
				case occ.Event.Type == alert.DueSoon:
					// Sent at dueAt - before, while the expectation is
					// still open with that due time.
					n.Condition, n.NextAttempt = alert.StillOpen, occ.Event.Timestamp
				}
			})
			if err != nil {
				return err
			}
		}
		if occ.Event.Type == alert.Acknowledged || occ.Event.Type == alert.Recovered {
			// The channels an escalation step already told hear of it
			// too (PagerDuty: the incident it opened is acknowledged or
			// resolved); a step not yet due is skipped when it comes.
			lapsedAt, err := expect.ParseTime(occ.About.LapsedAt)
			if err != nil {
				return nil
			}
			for i, st := range r.Escalate {
				if lapsedAt.Add(st.AfterOf()).After(now) {
					continue
				}
				for _, chID := range st.Channels {
					if err := stage(chID, occ.Key+"\x00escalate\x00"+strconv.Itoa(i), nil); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if occ.Event.Type != alert.Lapsed {
			return nil
		}
		// Escalation: each step's channels are told after its wait, unless
		// the lapse was acknowledged or satisfied by then.
		lapsedAt, err := expect.ParseTime(occ.Event.Timestamp)
		if err != nil {
			return nil
		}
		for i, st := range r.Escalate {
			at := expect.FormatTime(lapsedAt.Add(st.AfterOf()))
			for _, chID := range st.Channels {
				err := stage(chID, occ.Key+"\x00escalate\x00"+strconv.Itoa(i), func(n *alert.Notification) {
					n.Condition, n.NextAttempt = alert.StillUnresolved, at
					n.Event.Timestamp, n.Event.Data.Escalation = at, i+1
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// notificationChanged hands a notification that waits for delivery to the
// Enqueuer, for its next attempt's time.
func (s *Service) notificationChanged(ctx context.Context, ch store.Change) error {
	if ch.New == nil || s.queue == nil {
		return nil
	}
	n, err := decodeNotification(*ch.New)
	if err != nil {
		return err
	}
	if !n.Pending() {
		return nil
	}
	return s.queue.EnqueueNotification(ctx, n.AgentID, n.ID, s.opt.Now().Add(n.Wait(s.opt.Now())))
}
