package notify

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// Page is one page of notifications; Next is the token of the next.
type Page struct {
	Notifications []*alert.Notification `json:"notifications"`
	Next          string                `json:"next,omitempty"`
}

// DeadLetters lists channel id's dead-lettered notifications, oldest
// first. Only a principal that may change the channel (it acts for every
// owner) lists them: every notification of the channel's incarnation is
// then one it may see, so a page and its token hold nothing else. Errors:
// NotFound for another principal; Invalid naming "after" for a token this
// service did not issue.
func (s *Service) DeadLetters(ctx context.Context, agents []string, id string, limit int, after string) (Page, error) {
	c, err := s.manageable(ctx, agents, id)
	if err != nil {
		return Page{}, err
	}
	out := Page{Notifications: []*alert.Notification{}}
	q := store.Query{Index: store.GSI5, PK: deadPK(id, c.Incarnation), Limit: min(max(limit, 1), store.MaxLimit), After: after}
	p, err := s.store.Query(ctx, q)
	if errors.Is(err, store.ErrInvalid) {
		return Page{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "after", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return Page{}, err
	}
	for _, it := range p.Items {
		if n, err := decodeNotification(it); err == nil && n.Dead {
			out.Notifications = append(out.Notifications, n)
		}
	}
	out.Next = p.Next
	return out, nil
}

// manageable reads channel id for a principal that may change it.
// Errors: NotFound otherwise.
func (s *Service) manageable(ctx context.Context, agents []string, id string) (storedChannel, error) {
	c, err := s.channel(ctx, id)
	if err != nil {
		return c, err
	}
	if !c.ManageableBy(agents) {
		return c, errs.E(errs.NotFound, "no channel %q", id)
	}
	return c, nil
}

// Replay puts notification nid of agent, dead-lettered on channel id, back
// for delivery (its attempts counted afresh, its webhook-id the same).
// Errors: NotFound unless the principal may change the channel and there
// is such a dead letter of its current incarnation; Conflict when it is
// not dead-lettered.
func (s *Service) Replay(ctx context.Context, agents []string, id, agent, nid string) (*alert.Notification, error) {
	c, err := s.manageable(ctx, agents, id)
	if err != nil {
		return nil, err
	}
	if !actsFor(agents, agent) {
		return nil, errs.E(errs.NotFound, "no notification %q of agent %q", nid, agent)
	}
	var out *alert.Notification
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, notificationKey(agent, nid))
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "no notification %q of agent %q", nid, agent)
		}
		n, err := decodeNotification(it)
		if err != nil {
			return err
		}
		if n.ChannelID != id || n.ChannelIncarnation != c.Incarnation {
			return errs.E(errs.NotFound, "no notification %q of agent %q on channel %q", nid, agent, id)
		}
		if !n.Replay(s.opt.Now()) {
			return errs.E(errs.Conflict, "notification %q is not dead-lettered", nid)
		}
		next, err := notificationItem(n, s.opt.Retain)
		if err != nil {
			return err
		}
		tx.Put(next)
		out = n
		return nil
	})
	return out, err
}

// ForExpectation lists the notifications of agent's expectation (the
// console's timeline), oldest first, at most limit.
func (s *Service) ForExpectation(ctx context.Context, agent, expectationID string, limit int) ([]*alert.Notification, error) {
	return s.timeline(ctx, timelinePK(agent, "E#"+expectationID), limit)
}

// ForPlan lists the notifications of agent's plan (failed VERIFYs).
func (s *Service) ForPlan(ctx context.Context, agent, planID string, limit int) ([]*alert.Notification, error) {
	return s.timeline(ctx, timelinePK(agent, "P#"+planID), limit)
}

func (s *Service) timeline(ctx context.Context, pk string, limit int) ([]*alert.Notification, error) {
	out := []*alert.Notification{}
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI2, PK: pk, Limit: min(max(limit, 1), store.MaxLimit)})
	if err != nil {
		return nil, err
	}
	for _, it := range p.Items {
		if n, err := decodeNotification(it); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Pending calls fn for each notification waiting for delivery whose next
// attempt is due by upTo (every shard; the embedded worker's sweep and the
// AWS clock's), at most limit.
func (s *Service) Pending(ctx context.Context, upTo time.Time, limit int, fn func(agent, id string) error) error {
	bound := expect.FormatTime(upTo)
	seen := 0
	for shard := range NotifyShards {
		q := store.Query{Index: store.GSI5, PK: NotifyPK(shard), SKUpTo: bound, Limit: store.MaxLimit}
		for {
			p, err := s.store.Query(ctx, q)
			if err != nil {
				return err
			}
			for _, it := range p.Items {
				n, err := decodeNotification(it)
				if err != nil || !n.Pending() {
					continue
				}
				if err := fn(n.AgentID, n.ID); err != nil {
					return err
				}
				if seen++; seen >= limit {
					return nil
				}
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
	}
	return nil
}

func actsFor(agents []string, agent string) bool {
	return slices.Contains(agents, "*") || slices.Contains(agents, agent)
}

// RedactForeignErrors blanks, in ns, the last error of every notification
// whose channel a principal acting for agents may not see in full (a
// shared channel it does not own): the receiver's answer can name the
// operator's hosts. The failure's class stays. Errors are the store's.
func (s *Service) RedactForeignErrors(ctx context.Context, agents []string, ns []*alert.Notification) error {
	visible := map[string]bool{}
	for _, n := range ns {
		if n.LastError == "" {
			continue
		}
		v, ok := visible[n.ChannelID]
		if !ok {
			c, err := s.channel(ctx, n.ChannelID)
			if err != nil && !errs.Is(err, errs.NotFound) {
				return err
			}
			// A deleted channel's notifications say so, in our words.
			v = err != nil || c.VisibleTo(agents)
			visible[n.ChannelID] = v
		}
		if !v {
			n.LastError = "the receiver of a channel you do not own failed (" + n.LastErrorClass + ")"
		}
	}
	return nil
}
