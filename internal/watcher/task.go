package watcher

import (
	"encoding/json"
	"fmt"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// TypeTaskState is the type of an origin task's state item.
const TypeTaskState = "taskstate"

// taskState is what the store keeps of an origin task once it is
// canceled (no item before: raises pay one read, no write). A cancellation
// writes it before it looks up the task's expectations; a raise reads it
// and is refused once it is there; and the change feed reads it for each
// new expectation (WithdrawIfTaskCanceled), which withdraws one raised
// while the cancellation was under way. Without it a raise committing
// between a cancellation's lookup of the task's expectations and its
// commit stayed open.
type taskState struct {
	TaskID   string `json:"taskId"`
	Canceled bool   `json:"canceled,omitempty"`
	// CanceledAt is when the task's cancellation was processed.
	CanceledAt string `json:"canceledAt,omitempty"`
}

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

// writeTask stages an origin task's state.
func (st *txState) writeTask(t taskState) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	st.tx.Put(store.Item{Key: TaskStateKey(st.agent, t.TaskID), Type: TypeTaskState, Data: b})
	return nil
}

// errTaskCanceled refuses a raise for an origin task already canceled.
func errTaskCanceled(taskID string) error {
	e := errs.E(errs.Conflict, "origin task %q was canceled; expectations can no longer be raised for it", taskID)
	e.Fields = []errs.FieldError{{Path: "taskId", Message: "was canceled"}}
	return e
}
