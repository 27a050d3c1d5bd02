package watcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// TaskReader asks an agent about one of its tasks (a2aout.Sender.GetTask).
type TaskReader interface {
	GetTask(ctx context.Context, card expect.Card, taskID string) (expect.RemoteTask, error)
}

// SetTaskReader gives the watcher the A2A client that asks watched tasks'
// agents about them (expectations with watchTask). Without one, a watched
// task is not asked about and its expectation lapses as any other. Call
// it before the service is used.
func (s *Service) SetTaskReader(tr TaskReader) { s.tasks = tr }

// askTimeout bounds one question to a watched task's agent; an agent that
// does not answer in time leaves the instant to be evaluated as usual.
const askTimeout = 10 * time.Second

// answers holds what watched tasks' agents answered, by expectation id; a
// nil answer means asked without a usable answer (the agent unreachable,
// the task unknown).
type answers map[string]*expect.RemoteTask

// errAsk aborts a tick's transaction that found watched tasks to ask
// about: they are asked outside it (no transaction waits on an agent), and
// the tick runs again with the answers.
var errAsk = errors.New("watched tasks to ask about")

// watchSource is the source of the fact a watched task's answer makes.
func watchSource(w *expect.WatchTask) string { return "a2a-task:" + w.AgentID + "/" + w.TaskID }

// watchedTick evaluates open record r for instant in, asking first about
// its watched task: it returns handled=false when r watches no task (or
// this instant does not ask), and otherwise records the task's outcome
// (completed: satisfied; failed, rejected, canceled: refuted), or leaves
// the instant to tickRecord when the task is still running or the agent
// gave no usable answer. need collects the records whose task is to be
// asked about first; once final, a record not asked about is evaluated as
// usual rather than left.
func (s *Service) watchedTick(st *txState, r *expect.Record, in expect.Instant, ans answers, final bool, need *[]*expect.Record, now time.Time) (handled bool, err error) {
	if s.tasks == nil || !expect.WatchPending(r, in) {
		return false, nil
	}
	a, asked := ans[r.Expectation.ExpectationID]
	if !asked {
		if final {
			return false, nil
		}
		*need = append(*need, r)
		return true, nil
	}
	if a == nil {
		return false, nil
	}
	sub, err := st.subject(r.Expectation.Subject)
	if err != nil {
		return false, err
	}
	nr, changed, eff := expect.Watched(r, *a, watchSource(r.Expectation.WatchTask), sub, now)
	if !changed {
		return false, nil
	}
	st.set(nr)
	if eff != nil {
		if err := st.skipPredecessors(nr, eff.SkipCheck, now); err != nil {
			return false, err
		}
	}
	return true, nil
}

// ask asks each record's watched task of its agent, a few at a time, and
// adds the answers to ans.
func (s *Service) ask(ctx context.Context, recs []*expect.Record, ans answers) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, r := range recs {
		w := r.Expectation.WatchTask
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var got *expect.RemoteTask
			if card, err := s.Card(ctx, w.AgentID); err == nil {
				actx, cancel := context.WithTimeout(ctx, askTimeout)
				rt, err := s.tasks.GetTask(actx, card, w.TaskID)
				cancel()
				if err == nil {
					got = &rt
				}
			}
			mu.Lock()
			ans[r.Expectation.ExpectationID] = got
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// updateAsking runs a tick's read-modify-write, asking the watched tasks
// it needs first when fn reports some with errAsk.
func (s *Service) updateAsking(ctx context.Context, agent string, fn func(st *txState, ans answers, final bool, need *[]*expect.Record) error) error {
	ans := answers{}
	for round := 0; ; round++ {
		var need []*expect.Record
		err := s.update(ctx, agent, func(st *txState) error {
			need = need[:0]
			if err := fn(st, ans, round > 0, &need); err != nil {
				return err
			}
			if len(need) > 0 {
				return errAsk
			}
			return nil
		})
		if !errors.Is(err, errAsk) {
			return err
		}
		s.ask(ctx, need, ans)
	}
}
