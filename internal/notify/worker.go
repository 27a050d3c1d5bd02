package notify

import (
	"context"
	"sync"
	"time"
)

// Worker delivers notifications in the embedded runtime: the feed hands
// it each notification waiting for delivery (Service.HandleChange through
// EnqueueNotification), a timer holds those whose retry is not due yet,
// and a sweep finds any a full queue or a crash dropped. It is the
// Enqueuer of the embedded runtime.
type Worker struct {
	svc     *Service
	workers int

	mu      sync.Mutex
	pending map[job]bool
	queue   chan job
	ctx     context.Context
}

type job struct{ agent, id string }

// NewWorker returns a worker pool of n goroutines (default 8) over svc and
// makes it svc's Enqueuer.
func NewWorker(svc *Service, n int) *Worker {
	if n <= 0 {
		n = 8
	}
	w := &Worker{svc: svc, workers: n, pending: map[job]bool{}, queue: make(chan job, 16384), ctx: context.Background()}
	svc.SetEnqueuer(w)
	return w
}

// EnqueueNotification implements Enqueuer: the attempt runs at at (now if
// past). A notification already queued is not queued twice.
func (w *Worker) EnqueueNotification(_ context.Context, agent, id string, at time.Time) error {
	if d := time.Until(at); d > 0 {
		time.AfterFunc(d, func() { w.enqueue(job{agent, id}) })
		return nil
	}
	w.enqueue(job{agent, id})
	return nil
}

func (w *Worker) enqueue(j job) {
	w.mu.Lock()
	if w.pending[j] || w.ctx.Err() != nil {
		w.mu.Unlock()
		return
	}
	w.pending[j] = true
	w.mu.Unlock()
	select {
	case w.queue <- j:
	default:
		w.mu.Lock()
		delete(w.pending, j)
		w.mu.Unlock() // the sweep finds it
	}
}

// Run delivers until ctx ends, sweeping every interval (default 30s) for
// notifications whose attempt is due and was not queued.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	var wg sync.WaitGroup
	for range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-w.queue:
					retry, again := w.svc.Attempt(ctx, j.agent, j.id)
					w.mu.Lock()
					delete(w.pending, j)
					w.mu.Unlock()
					if again && ctx.Err() == nil {
						// The committed outcome's change re-enqueues it
						// too; this covers a commit that failed.
						time.AfterFunc(retry, func() { w.enqueue(j) })
					}
				}
			}
		}()
	}
	w.sweep(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			w.sweep(ctx)
		}
	}
}

func (w *Worker) sweep(ctx context.Context) {
	err := w.svc.Pending(ctx, w.svc.opt.Now(), 10000, func(agent, id string) error {
		w.enqueue(job{agent, id})
		return nil
	})
	if err != nil && ctx.Err() == nil {
		w.svc.log.Error("notification sweep failed", "err", err)
	}
}
