package evaluation

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// GradingWorker is the embedded runtime's grading queue: it finds the due
// jobs in the grading index (so a restart loses none) and runs them, a few
// at a time. Enqueue only wakes it.
type GradingWorker struct {
	svc *Service
	log *slog.Logger
	// Parallel bounds the judge calls at once (default 4).
	Parallel int
	// Idle is the longest it sleeps without looking (default 30 s).
	Idle time.Duration
	wake chan struct{}
}

// NewGradingWorker returns the worker of svc and makes it svc's Grader.
func NewGradingWorker(svc *Service, log *slog.Logger) *GradingWorker {
	w := &GradingWorker{svc: svc, log: log, Parallel: 4, Idle: 30 * time.Second, wake: make(chan struct{}, 1)}
	svc.SetGrader(w)
	return w
}

// Enqueue wakes the worker; the jobs are already in the grading index.
func (w *GradingWorker) Enqueue(_ context.Context, _ []GradeJob) error {
	wake(w.wake)
	return nil
}

// Run grades until ctx ends.
func (w *GradingWorker) Run(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := w.runDue(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("grading", "err", err)
		}
		// Review items whose due time a stopped process left to raise
		// or satisfy.
		if _, rerr := w.svc.RepairReviews(ctx, reviewRepairAfter, 100); rerr != nil && ctx.Err() == nil {
			w.log.Error("review due times", "err", rerr)
		}
		if n > 0 && err == nil {
			continue // more may be due
		}
		wait := w.Idle
		if err == nil {
			if next, err := w.svc.NextGrading(ctx); err == nil && !next.IsZero() {
				wait = min(wait, max(next.Sub(w.svc.now()), 10*time.Millisecond))
			}
		}
		sleepUnlessWoken(ctx, w.wake, wait)
	}
}

// sleepUnlessWoken waits d, or until wake is signalled or ctx ends: the
// idle wait of the embedded workers, which Enqueue cuts short (wake).
func sleepUnlessWoken(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	}
}

// wake signals a worker's wake channel without blocking (a signal pending
// already is enough).
func wake(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reviewRepairAfter is how long an item may wait on the watcher before
// RepairReviews takes it (the process that made it does so at once).
const reviewRepairAfter = time.Minute

// failedJobWait is how long a job whose handling failed steps back.
const failedJobWait = time.Minute

// runDue runs one page of due jobs and returns how many it ran.
func (w *GradingWorker) runDue(ctx context.Context) (int, error) {
	jobs, err := w.svc.ListGrading(ctx, w.svc.now(), 64)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, max(1, w.Parallel))
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := w.svc.GradeCriterion(ctx, j); err != nil {
				// Not the judge (that is state): the store or the
				// record. The job steps back, so that jobs that keep
				// failing cannot fill every page and starve the others.
				if ctx.Err() == nil {
					_ = w.svc.PostponeGrading(ctx, j, failedJobWait)
				}
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(jobs), first
}
