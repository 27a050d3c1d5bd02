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

// Bounds on asking watched tasks' agents, so that no tenant's agent can
// hold the clock that every tenant shares: one question waits at most
// askTimeout; one batch's questions all end within askBudget; one agent
// gets at most askPerAgent questions at once; and an agent that failed
// slowly is not asked again for askBackoff (its watchers' instants are
// then evaluated as usual). A question not answered in time leaves the
// instant to be evaluated as usual.
const (
	askTimeout  = 5 * time.Second
	askBudget   = 5 * time.Second
	askPerAgent = 2
	askBackoff  = time.Minute
	// askSlow is how long a failed question took for its agent to count
	// as unresponsive (a quick refusal, such as an unknown task, does not).
	askSlow = time.Second
)

// answers holds what watched tasks' agents answered, by the watcher's
// agent and expectation id (answerKey); a nil answer means asked without a
// usable answer (the agent unreachable, the task unknown).
type answers map[string]*expect.RemoteTask

// answerKey keys answers: expectation ids are the client's, unique only
// within an agent.
func answerKey(r *expect.Record) string { return r.AgentID + "\x00" + r.Expectation.ExpectationID }

// askGate remembers the watched agents that failed slowly, until when
// they are not asked.
type askGate struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (g *askGate) closed(agent string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return now.Before(g.until[agent])
}

func (g *askGate) fail(agent string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until == nil {
		g.until = map[string]time.Time{}
	}
	if len(g.until) > 10000 {
		clear(g.until) // a bound, not a cache: forgetting only asks again
	}
	g.until[agent] = now.Add(askBackoff)
}

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
	a, asked := ans[answerKey(r)]
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

// ask asks each record's watched task of its agent within the bounds
// above, and adds the answers to ans (nil for a question not asked or not
// answered).
func (s *Service) ask(ctx context.Context, recs []*expect.Record, ans answers) {
	timeout, budget := askTimeout, askBudget
	if s.askLimits != nil {
		timeout, budget = s.askLimits[0], s.askLimits[1]
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	perAgent := map[string]chan struct{}{}
	for _, r := range recs {
		w := r.Expectation.WatchTask
		mu.Lock()
		ans[answerKey(r)] = nil
		mu.Unlock()
		if s.askGate.closed(w.AgentID, time.Now()) {
			continue
		}
		agentSem := perAgent[w.AgentID]
		if agentSem == nil {
			agentSem = make(chan struct{}, askPerAgent)
			perAgent[w.AgentID] = agentSem
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case agentSem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-agentSem }()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if s.askGate.closed(w.AgentID, time.Now()) {
				return
			}
			card, err := s.Card(ctx, w.AgentID)
			if err != nil {
				return
			}
			actx, cancel := context.WithTimeout(ctx, timeout)
			start := time.Now()
			rt, err := s.tasks.GetTask(actx, card, w.TaskID)
			cancel()
			if err != nil {
				if time.Since(start) >= min(askSlow, timeout/2) {
					s.askGate.fail(w.AgentID, time.Now())
				}
				return
			}
			mu.Lock()
			ans[answerKey(r)] = &rt
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
