package notify

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// PutSilence creates or replaces silence id for a principal (name, acting
// for agents). A tenant silences its own agents only: matchers.agentId is
// required and must be one of its agents; an operator may silence any or
// all. Errors: Invalid naming the field; Forbidden for another's agent;
// NotFound for a silence the principal may not change (as if there were
// none); Conflict past alert.MaxSilences.
func (s *Service) PutSilence(ctx context.Context, name string, agents []string, id string, body []byte) (alert.Silence, bool, error) {
	sil, err := alert.ParseSilence(id, body)
	if err != nil {
		return alert.Silence{}, false, err
	}
	operator := slices.Contains(agents, "*")
	switch a := sil.Matchers.AgentID; {
	case a == "" && !operator:
		return alert.Silence{}, false, errs.Fields("the silence is not valid", []errs.FieldError{{Path: "matchers.agentId",
			Message: "is required: a token that does not act for every agent silences its own agents, one at a time"}})
	case a != "" && !operator && !slices.Contains(agents, a):
		return alert.Silence{}, false, errs.E(errs.Forbidden, "token may not act for agent %q", a)
	}
	now := expect.FormatTime(s.opt.Now())
	created := false
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, silenceKey(id))
		if err != nil {
			return err
		}
		sil.Owners, sil.CreatedBy, sil.CreatedAt, sil.UpdatedAt = slices.Clone(agents), name, now, now
		created = !ok
		if ok {
			var cur alert.Silence
			if err := json.Unmarshal(it.Data, &cur); err != nil {
				return err
			}
			if !cur.ManageableBy(agents) {
				return errs.E(errs.NotFound, "no silence %q that this token may change", id)
			}
			sil.Owners, sil.CreatedBy, sil.CreatedAt = cur.Owners, cur.CreatedBy, cur.CreatedAt
		} else {
			p, err := s.store.Query(ctx, store.Query{PK: silencesPK, Limit: alert.MaxSilences})
			if err != nil {
				return err
			}
			if len(p.Items) >= alert.MaxSilences {
				return errs.E(errs.Conflict, "this server holds %d silences, the most it keeps; delete some first", alert.MaxSilences)
			}
		}
		b, err := json.Marshal(sil)
		if err != nil {
			return err
		}
		item := store.Item{Key: silenceKey(id), Type: TypeSilence, Data: b}
		if sil.EndsAt != "" && s.opt.Retain > 0 {
			// A one-off silence goes some time after it ended.
			if end, err := expect.ParseTime(sil.EndsAt); err == nil {
				item.ExpiresAt = expect.ExpiryTime(end, s.opt.Retain).Unix()
			}
		}
		tx.Put(item)
		return nil
	})
	if err != nil {
		return alert.Silence{}, false, err
	}
	s.silences.forget()
	return sil, created, nil
}

// Silence returns silence id if a principal acting for agents may see it.
// Errors: NotFound (also for one it may not see).
func (s *Service) Silence(ctx context.Context, agents []string, id string) (alert.Silence, error) {
	it, err := s.store.Get(ctx, silenceKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return alert.Silence{}, errs.E(errs.NotFound, "no silence %q", id)
	}
	if err != nil {
		return alert.Silence{}, err
	}
	var sil alert.Silence
	if err := json.Unmarshal(it.Data, &sil); err != nil {
		return alert.Silence{}, err
	}
	if !sil.VisibleTo(agents) {
		return alert.Silence{}, errs.E(errs.NotFound, "no silence %q", id)
	}
	return sil, nil
}

// Silences lists the silences a principal acting for agents may see.
func (s *Service) Silences(ctx context.Context, agents []string) ([]alert.Silence, error) {
	all, err := s.allSilences(ctx)
	if err != nil {
		return nil, err
	}
	out := []alert.Silence{}
	for _, sil := range all {
		if sil.VisibleTo(agents) {
			out = append(out, sil)
		}
	}
	return out, nil
}

// DeleteSilence removes silence id. Errors: NotFound (also for one the
// principal may not change).
func (s *Service) DeleteSilence(ctx context.Context, agents []string, id string) error {
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, silenceKey(id))
		if err != nil {
			return err
		}
		var cur alert.Silence
		if ok {
			err = json.Unmarshal(it.Data, &cur)
		}
		if !ok || err != nil || !cur.ManageableBy(agents) {
			return errs.E(errs.NotFound, "no silence %q that this token may change", id)
		}
		tx.Delete(silenceKey(id))
		return nil
	})
	if err == nil {
		s.silences.forget()
	}
	return err
}

func (s *Service) allSilences(ctx context.Context) ([]alert.Silence, error) {
	p, err := s.store.Query(ctx, store.Query{PK: silencesPK, Limit: alert.MaxSilences})
	if err != nil {
		return nil, err
	}
	out := make([]alert.Silence, 0, len(p.Items))
	for _, it := range p.Items {
		var sil alert.Silence
		if json.Unmarshal(it.Data, &sil) == nil {
			sil.Compile() // before the list is shared by the sends
			out = append(out, sil)
		}
	}
	return out, nil
}

// silencesTTL is how long a process keeps the silences it checks every
// send against: a silence put in another process (on AWS, the API
// function) holds back what is sent after it within that.
const silencesTTL = 5 * time.Second

type silenceCache struct {
	mu   sync.Mutex
	at   time.Time
	list []alert.Silence
}

func (c *silenceCache) forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// activeSilence returns the silence that holds back an event of agent
// about what at now (the first, by id), or nil. lapseTask asks for the
// silences that also hold back lapse tasks.
func (s *Service) activeSilence(ctx context.Context, agent string, about alert.Subject, now time.Time, lapseTask bool) (*alert.Silence, error) {
	s.silences.mu.Lock()
	list, fresh := s.silences.list, time.Since(s.silences.at) < silencesTTL
	s.silences.mu.Unlock()
	if !fresh {
		var err error
		if list, err = s.allSilences(ctx); err != nil {
			return nil, err
		}
		s.silences.mu.Lock()
		s.silences.list, s.silences.at = list, time.Now()
		s.silences.mu.Unlock()
	}
	for i := range list {
		sil := &list[i]
		if (!lapseTask || sil.LapseTasks) && sil.Matches(agent, about) && sil.ActiveAt(now) {
			return sil, nil
		}
	}
	return nil, nil
}

// SilencedLapseTask returns the id of the silence that holds back the
// lapse task of rec at now ("" when none does), for the outbox. Errors
// are the store's.
func (s *Service) SilencedLapseTask(ctx context.Context, rec *expect.Record) (string, error) {
	if s == nil {
		return "", nil // a runtime without alerting
	}
	about := alert.Subject{ExpectationID: rec.Expectation.ExpectationID, Kind: rec.Expectation.Kind,
		SubjectType: rec.Expectation.Subject.Type, SubjectID: rec.Expectation.Subject.ID}
	sil, err := s.activeSilence(ctx, rec.AgentID, about, s.opt.Now(), true)
	if err != nil || sil == nil {
		return "", err
	}
	return sil.ID, nil
}
