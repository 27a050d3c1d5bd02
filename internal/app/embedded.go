// Package app assembles the embedded default: one process, the bbolt store,
// in-process timers, the in-process change feed, the outbox and the HTTP
// API. functions/local wires flags into it; tests start it in-process.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/outbox"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/timers"
	"github.com/agentclock/clockwork/internal/watcher"
)

// Config configures the embedded runtime.
type Config struct {
	// DataDir holds the store file (clockwork.db).
	DataDir string
	// Auth authenticates requests.
	Auth *auth.Authenticator
	// Log receives structured logs.
	Log *slog.Logger
	// Rules of the watcher.
	Rules expect.Config
	// Outbox tunes lapse delivery.
	Outbox outbox.Options
	// AllowPrivateAgents lets lapse tasks reach loopback and private
	// addresses (the local default: agents under test run on loopback).
	AllowPrivateAgents bool
	// NoSync turns off fsync per commit (benchmarks only).
	NoSync bool
	// TimerWorkers evaluate instants concurrently (default 8).
	TimerWorkers int
	// Now is the watcher's clock (default time.Now).
	Now func() time.Time
	// Extra HTTP routes (the evaluation loop) and feed handlers.
	Routes   []func(*http.ServeMux, *httpapi.Handler)
	Handlers map[string]feed.Handler
	// Sender overrides lapse delivery (default: the A2A SDK sender).
	Sender outbox.Sender
	// Lateness observes how late instants fire.
	Lateness func(time.Duration)
}

// App is a running embedded runtime.
type App struct {
	Store   *bolt.Store
	Watcher *watcher.Service
	Timers  *timers.Timers
	Outbox  *outbox.Outbox
	Feed    *feed.Processor
	Handler *httpapi.Handler

	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    *slog.Logger
	once   sync.Once
}

// Start opens the store and starts the feed, the timers and the outbox. It
// replays the unacknowledged feed, rebuilds the timers of every open
// expectation (instants that passed while the process was down fire at
// once) and re-enqueues undelivered lapses.
func Start(cfg Config) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.Rules.MaxLineage == 0 {
		cfg.Rules = expect.DefaultConfig()
	}
	if cfg.TimerWorkers == 0 {
		cfg.TimerWorkers = 8
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := bolt.Open(filepath.Join(cfg.DataDir, "clockwork.db"), bolt.Options{NoSync: cfg.NoSync, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	a := &App{Store: st, log: cfg.Log}
	a.Watcher = watcher.New(st, cfg.Now, cfg.Rules)
	sender := cfg.Sender
	if sender == nil {
		client := netguard.NewHTTPClient(netguard.Guard{AllowPrivate: cfg.AllowPrivateAgents}, 15*time.Second)
		sender = a2aout.NewSender(a2aout.Options{HTTPClient: client})
	}
	a.Outbox = outbox.New(a.Watcher, sender, cfg.Outbox, cfg.Log)
	a.Timers = timers.New(a.Watcher.Tick, cfg.TimerWorkers, cfg.Log)
	a.Timers.Lateness = cfg.Lateness
	a.Feed = &feed.Processor{Scheduler: a.Timers, Outbox: a.Outbox, Handlers: cfg.Handlers}
	a.Handler = httpapi.New(a.Watcher, cfg.Auth, cfg.Log, cfg.Routes...)

	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	// Rebuild before consuming the feed; both paths are idempotent.
	n := 0
	if err := a.Watcher.ForEachOpen(ctx, func(r *expect.Record) error {
		n++
		return a.Timers.Schedule(ctx, expect.Instants(r))
	}); err != nil {
		cancel()
		st.Close()
		return nil, fmt.Errorf("rebuild timers: %w", err)
	}
	if err := a.Outbox.Recover(ctx); err != nil {
		cancel()
		st.Close()
		return nil, fmt.Errorf("recover outbox: %w", err)
	}
	cfg.Log.Info("embedded runtime started", "data", cfg.DataDir, "openExpectations", n, "timers", a.Timers.Len())
	a.run(func() { a.Timers.Run(ctx) })
	a.run(func() { a.Outbox.Run(ctx) })
	a.run(func() { _ = feed.Run(ctx, st, a.Feed, cfg.Log) })
	return a, nil
}

func (a *App) run(f func()) {
	a.wg.Add(1)
	go func() { defer a.wg.Done(); f() }()
}

// Close stops the background work, waits for it, and closes the store.
// Everything committed is durable; what was not yet delivered or fired is
// picked up by the next Start.
func (a *App) Close() error {
	var err error
	a.once.Do(func() {
		a.cancel()
		a.wg.Wait()
		err = a.Store.Close()
	})
	return err
}

// Quiesce processes the feed until it is empty (tests and shutdown).
func (a *App) Quiesce(ctx context.Context) error { return feed.Drain(ctx, a.Store, a.Feed) }

var _ store.FeedReader = (*bolt.Store)(nil)
