package watcher

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// Push subscriptions of watched tasks: when an expectation watching a
// task is raised, the watcher asks the task's agent to push the task's
// updates to POST /v1/watches/{agentId}/{expectationId} with a token of its
// own; a push that ends the task decides the expectation at once, rather
// than at its due instant (where the watcher asks anyway: watch.go).

// TypeWatch is the item type of a watched task's subscription.
const TypeWatch = "watch"

// TaskSubscriber asks an agent to push a task's updates to url with token
// (a2aout.Sender.SubscribeTask).
type TaskSubscriber interface {
	SubscribeTask(ctx context.Context, card expect.Card, taskID, url, token string) error
}

// SetWatchPush makes the watcher subscribe to watched tasks: baseURL is
// this service's public base URL (-public-url, PUBLIC_URL), where agents
// push. Without it, or without sub, watched tasks are only asked about at
// their expectations' instants. Call it before the service is used.
func (s *Service) SetWatchPush(baseURL string, sub TaskSubscriber) {
	s.pushBase, s.subscriber = baseURL, sub
}

// WatchPushPath is the path where the agent of an expectation's watched
// task pushes its updates.
func WatchPushPath(agentID, expectationID string) string {
	return "/v1/watches/" + url.PathEscape(agentID) + "/" + url.PathEscape(expectationID)
}

// WatchKey is the key of an expectation's watched-task subscription.
func WatchKey(agent, expectationID string) store.Key {
	return store.Key{PK: agentPK(agent), SK: "W#" + esc(expectationID)}
}

// subscription is what the watcher keeps of one: never the token, only its
// hash.
type subscription struct {
	AgentID       string `json:"agentId"`
	ExpectationID string `json:"expectationId"`
	// RaisedAt is the record's: an id raised again after its record
	// expired is another expectation, which this subscription must not
	// decide.
	RaisedAt     string `json:"raisedAt"`
	WatchedAgent string `json:"watchedAgent"`
	TaskID       string `json:"taskId"`
	TokenSHA256  string `json:"tokenSha256"`
	CreatedAt    string `json:"createdAt"`
}

// of reports whether the subscription is the one of record r.
func (sub *subscription) of(r *expect.Record) bool {
	w := r.Expectation.WatchTask
	return w != nil && sub.RaisedAt == r.RaisedAt && sub.WatchedAgent == w.AgentID && sub.TaskID == w.TaskID
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// subscribeTimeout bounds asking an agent to push a task's updates.
const subscribeTimeout = 5 * time.Second

// SubscribeWatch subscribes to the task newly raised open record r
// watches, once: the subscription is stored (with a fresh token's hash)
// before the agent is asked, and an existing one (a replayed change) asks
// nothing more. An agent that refuses or does not answer leaves the
// expectation to be asked about at its instants. Errors: the store's.
func (s *Service) SubscribeWatch(ctx context.Context, r *expect.Record) error {
	w := r.Expectation.WatchTask
	if s.pushBase == "" || s.subscriber == nil || w == nil || r.State != expect.StateOpen {
		return nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	sub := subscription{AgentID: r.AgentID, ExpectationID: r.Expectation.ExpectationID, RaisedAt: r.RaisedAt, WatchedAgent: w.AgentID, TaskID: w.TaskID,
		TokenSHA256: tokenHash(token), CreatedAt: expect.FormatTime(s.now())}
	data, err := json.Marshal(sub)
	if err != nil {
		return err
	}
	it := store.Item{Key: WatchKey(r.AgentID, r.Expectation.ExpectationID), Type: TypeWatch, Data: data}
	if s.cfg.Retain > 0 {
		// Kept while a push could still record something on the record.
		it.ExpiresAt = expect.ExpiryTime(r.GraceEnd(), s.cfg.Retain).Unix()
	}
	created := false
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		created = false
		old, ok, err := tx.Get(ctx, it.Key)
		if err != nil {
			return err
		}
		if ok {
			var prev subscription
			if json.Unmarshal(old.Data, &prev) == nil && prev.of(r) {
				return nil // made before: a replayed change
			}
			// Left by an earlier expectation of this id: replaced.
		}
		// Only while the record is there and open (not erased meanwhile).
		rec, ok, err := tx.Get(ctx, ExpectationKey(r.AgentID, r.Expectation.ExpectationID))
		if err != nil || !ok {
			return err
		}
		if cur, err := DecodeRecord(rec); err != nil || cur.State != expect.StateOpen || cur.RaisedAt != r.RaisedAt {
			return err
		}
		tx.Put(it)
		created = true
		return nil
	})
	if err != nil || !created {
		return err
	}
	card, err := s.Card(ctx, w.AgentID)
	if err != nil {
		return nil // erased meanwhile: its instants decide
	}
	sctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	if err := s.subscriber.SubscribeTask(sctx, card, w.TaskID, s.pushBase+WatchPushPath(r.AgentID, r.Expectation.ExpectationID), token); err != nil {
		s.metrics.Record(metrics.WatchSubscribeFailures, 1)
	}
	return nil
}

// errNoWatch answers a push for no subscription and one with the wrong
// token alike, so that neither tells which expectations exist.
func errNoWatch() error { return errs.E(errs.NotFound, "no watched task here") }

// WatchPush records a push of the watched task's agent for expectation
// expectationID of agentID: token must be the subscription's, and taskID
// its task. A completed task satisfies the expectation, a failed, rejected
// or canceled one refutes it; any other state, or an expectation no longer
// open, changes nothing. Errors: NotFound for no such subscription or a
// wrong token; Invalid for another task.
func (s *Service) WatchPush(ctx context.Context, agentID, expectationID, token, taskID string, rt expect.RemoteTask) error {
	it, err := s.store.Get(ctx, WatchKey(agentID, expectationID))
	if errors.Is(err, store.ErrNotFound) {
		return errNoWatch()
	}
	if err != nil {
		return internal(err)
	}
	var sub subscription
	if err := json.Unmarshal(it.Data, &sub); err != nil {
		return internal(err)
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(tokenHash(token)), []byte(sub.TokenSHA256)) != 1 {
		return errNoWatch()
	}
	if taskID != sub.TaskID {
		return errs.Fields("invalid push", []errs.FieldError{{Path: "taskId", Message: "is not the task this expectation watches"}})
	}
	err = s.update(ctx, agentID, func(st *txState) error {
		r, err := st.record(expectationID)
		if err != nil || r == nil || r.State != expect.StateOpen || !sub.of(r) {
			return err
		}
		subj, err := st.subject(r.Expectation.Subject)
		if err != nil {
			return err
		}
		nr, changed, eff := expect.Watched(r, rt, watchSource(r.Expectation.WatchTask), subj, s.now())
		if !changed {
			return nil
		}
		st.set(nr)
		if eff != nil {
			if err := st.skipPredecessors(nr, eff.SkipCheck, s.now()); err != nil {
				return err
			}
		}
		return st.stage()
	})
	return internal(err)
}
