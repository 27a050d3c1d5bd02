package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// TypeTaskState is the type of an origin task's state item.
const TypeTaskState = "taskstate"

// taskState is what the store keeps of an origin task once it is
// canceled (no item before: raises pay one read, no write). A cancellation
// writes it before it looks up the task's expectations; a raise reads it
// and is refused once it is there; and the change feed reads it for each
// new expectation (WithdrawIfTaskCanceled), which withdraws one whose raise
// read the task before the mark but committed after the cancellation's
// lookup (a raise reads the task state without holding its commit to it:
// that would make every raise a transaction). Without it such a raise
// stayed open.
type taskState struct {
	TaskID   string `json:"taskId"`
	Canceled bool   `json:"canceled,omitempty"`
	// CanceledAt is when the task's cancellation was processed.
	CanceledAt string `json:"canceledAt,omitempty"`
	// Swept is set once the cancellation has withdrawn every expectation
	// its lookup found and answered.
	Swept bool `json:"swept,omitempty"`
	// FeedWithdrew holds the expectations the change feed withdrew while
	// the cancellation was under way (before Swept), so that the
	// cancellation's answer lists them too: the feed sees every new
	// expectation of the task, and may reach one before the cancellation's
	// rounds do. Bounded by maxFeedWithdrewBytes.
	FeedWithdrew []string `json:"feedWithdrew,omitempty"`
}

// maxFeedWithdrewBytes bounds the ids kept in taskState.FeedWithdrew, well
// within an item's 400 KB: about 2,000 ids of the longest kind, tens of
// thousands of usual ones. Past it, what the feed withdraws is still
// withdrawn but missing from the cancellation's answer.
const maxFeedWithdrewBytes = 256 << 10

// readTask reads an origin task's state (zero when it has none), tracked
// for the commit's compare-and-set.
func (st *txState) readTask(taskID string) (taskState, error) {
	it, ok, err := st.tx.Get(st.ctx, TaskStateKey(st.agent, taskID))
	if err != nil || !ok {
		return taskState{TaskID: taskID}, err
	}
	var t taskState
	if err := json.Unmarshal(it.Data, &t); err != nil {
		return t, fmt.Errorf("decode task state %s: %w", it.Key, err)
	}
	return t, nil
}

// writeTask stages an origin task's state. A cancellation is kept as
// long as a final record (-retain-expectations from when it was made): a
// raise for the task after that is not withdrawn.
func (st *txState) writeTask(t taskState) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	it := store.Item{Key: TaskStateKey(st.agent, t.TaskID), Type: TypeTaskState, Data: b}
	if at, err := expect.ParseTime(t.CanceledAt); err == nil && st.retain > 0 {
		it.ExpiresAt = expect.ExpiryTime(at, st.retain).Unix()
	}
	st.tx.Put(it)
	return nil
}

// errTaskCanceled refuses a raise for an origin task already canceled.
func errTaskCanceled(taskID string) error {
	e := errs.E(errs.Conflict, "origin task %q was canceled; expectations can no longer be raised for it", taskID)
	e.Fields = []errs.FieldError{{Path: "taskId", Message: "was canceled"}}
	return e
}

// TaskCanceled withdraws every open expectation raised by the origin task
// taskID, because the task was canceled, and refuses later raises for it
// (Raise). It returns the withdrawn records.
func (s *Service) TaskCanceled(ctx context.Context, agentID, taskID string) ([]*expect.Record, error) {
	if expect.IsHeartbeatID(taskID) {
		return nil, errs.Fields("invalid cancellation", []errs.FieldError{{Path: "taskId",
			Message: fmt.Sprintf("starts with %q, the origin of a heartbeat's periods, which only pausing or deleting the heartbeat ends", expect.HeartbeatIDPrefix)}})
	}
	if expect.IsReservedID(taskID) {
		return nil, errs.Fields("invalid cancellation", []errs.FieldError{{Path: "taskId",
			Message: fmt.Sprintf("starts with %q, the origin of review items' due times, which end when their reviews are in", expect.ReviewIDPrefix)}})
	}
	// The task is marked canceled first, in a commit of its own, so that
	// a raise for it either committed before the lookup below (which
	// finds it) or reaches the change feed after the mark (which
	// withdraws it: WithdrawIfTaskCanceled); later raises are refused.
	err := s.update(ctx, agentID, func(st *txState) error {
		task, err := st.readTask(taskID)
		if err != nil || task.Canceled {
			return err
		}
		task.Canceled, task.CanceledAt = true, expect.FormatTime(s.now())
		return st.writeTask(task)
	})
	if err != nil {
		return nil, internal(err)
	}
	var out []*expect.Record
	for {
		var round []*expect.Record
		more := false
		err := s.update(ctx, agentID, func(st *txState) error {
			now := s.now()
			round, more = nil, false
			open, err := st.lookup(taskPK(agentID, taskID), lookupTask)
			if err != nil {
				return err
			}

			for _, r := range open {
				if st.writes() >= store.MaxCommitWrites-1 {
					more = true // the rest in the next commit; cancellation is idempotent
					break
				}
				if nr, changed, err := expect.Withdraw(r, fmt.Sprintf("origin task %s was canceled", taskID), now); err == nil && changed {
					st.set(nr)
					round = append(round, nr)
				}
			}
			return st.stage()
		})
		if err != nil {
			return out, internal(err)
		}
		out = append(out, round...)
		if !more {
			break
		}
	}
	// Swept ends the cancellation; the expectations the change feed
	// withdrew meanwhile join its answer.
	var extra []*expect.Record
	err = s.update(ctx, agentID, func(st *txState) error {
		extra = nil
		task, err := st.readTask(taskID)
		if err != nil || task.Swept {
			return err
		}
		for _, id := range task.FeedWithdrew {
			if slices.ContainsFunc(out, func(r *expect.Record) bool { return r.Expectation.ExpectationID == id }) {
				continue
			}
			r, err := st.record(id)
			if err != nil {
				return err
			}
			if r != nil && r.State == expect.StateWithdrawn {
				extra = append(extra, r)
			}
		}
		task.Swept, task.FeedWithdrew = true, nil
		return st.writeTask(task)
	})
	if err != nil {
		return out, internal(err)
	}
	return append(out, extra...), nil
}

// idsBytes is the length of ids, all together.
func idsBytes(ids []string) int {
	n := 0
	for _, id := range ids {
		n += len(id)
	}
	return n
}

// WithdrawIfTaskCanceled withdraws an open expectation whose origin task
// was canceled: the change feed calls it for each newly raised
// expectation, so that one whose raise committed after the cancellation's
// lookup is withdrawn like the task's others (and, while the cancellation is under way, named in its
// answer: taskState.FeedWithdrew). It changes nothing otherwise, and never
// waits for the cancellation.
func (s *Service) WithdrawIfTaskCanceled(ctx context.Context, agentID, taskID, expectationID string) error {
	err := s.update(ctx, agentID, func(st *txState) error {
		task, err := st.readTask(taskID)
		if err != nil || !task.Canceled {
			return err
		}
		r, err := st.record(expectationID)
		if err != nil || r == nil || r.TaskID != taskID {
			return err
		}
		nr, changed, err := expect.Withdraw(r, fmt.Sprintf("origin task %s was canceled", taskID), s.now())
		if err != nil || !changed {
			return nil
		}
		st.set(nr)
		if !task.Swept && idsBytes(task.FeedWithdrew)+len(expectationID) <= maxFeedWithdrewBytes {
			task.FeedWithdrew = append(task.FeedWithdrew, expectationID)
			if err := st.writeTask(task); err != nil {
				return err
			}
		}
		return st.stage()
	})
	return internal(err)
}
