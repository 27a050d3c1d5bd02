// Package app assembles the embedded default: one process, the bbolt store,
// in-process timers, the in-process change feed, the outbox and the HTTP
// API. functions/local wires flags into it; tests start it in-process.
package app

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/console"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/judge"
	"github.com/agentclock/clockwork/internal/mcpapi"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/notify"
	"github.com/agentclock/clockwork/internal/otlpin"
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
	// Rules of the watcher; Rules.Retain is -retain-expectations (final
	// records, subjects' memory, notifications; zero: forever).
	Rules expect.Config
	// RetainEvidence is -retain-evidence (zero: forever).
	RetainEvidence time.Duration
	// Outbox tunes lapse delivery.
	Outbox outbox.Options
	// AllowPrivateAgents lets lapse tasks reach loopback and private
	// addresses (the local default: agents under test run on loopback).
	AllowPrivateAgents bool
	// MCPAllowedOrigins are the browser origins that may call /mcp
	// (httpapi.Handler.MCPAllowedOrigins; none by default).
	MCPAllowedOrigins []string
	// OTLP bounds trace ingest (-otlp-* flags; zero fields: defaults).
	OTLP otlpin.Config
	// NoSync turns off fsync per commit (benchmarks only).
	NoSync bool
	// TimerWorkers evaluate instants concurrently (default 8).
	TimerWorkers int
	// Now is the watcher's clock (default time.Now).
	Now func() time.Time
	// JudgeURL is the model judge for HEURISTIC criteria ("" leaves them
	// pending); JudgeToken is sent to it as a bearer token.
	JudgeURL, JudgeToken string
	// JudgeKind chooses the judge (judge.Config.Kind: "http" (default),
	// "openai", "bedrock"); JudgeModel is its model; JudgeAPIKey the
	// OpenAI-compatible endpoint's key. For bedrock, JudgeURL overrides the
	// service endpoint.
	JudgeKind, JudgeModel, JudgeAPIKey string
	// AllowPrivateJudge lets the judge be on loopback or a private address.
	AllowPrivateJudge bool
	// JudgeRetry bounds the judge's attempts at each HEURISTIC criterion
	// (zero: evaluation's defaults; tests shorten it).
	JudgeRetry evaluation.JudgeRetry
	// EvaluationJudgeRate bounds the judge calls evaluations make per
	// second (-evaluation-judge-rate; zero: evaluation's default).
	EvaluationJudgeRate float64
	// PauseFeed starts without consuming the change feed (tests use it to
	// stand for a crash between a commit and its asynchronous effects).
	PauseFeed bool
	// NoSigningKey turns off the Ed25519 server signature on VERIFY.
	NoSigningKey bool
	// Sender overrides lapse delivery (default: the A2A SDK sender).
	Sender outbox.Sender
	// AgentHTTPClient overrides the default sender's guarded client (tests
	// use it to trust a test CA for agents behind TLS).
	AgentHTTPClient *http.Client
	// Lateness observes how late instants fire.
	Lateness func(time.Duration)
	// TimerLookahead is how far ahead the timers hold instants (default
	// timers.DefaultLookahead); later ones are read from the store when
	// the window reaches them.
	TimerLookahead time.Duration
	// Metrics receives the services' measurements (functions/local: the
	// Prometheus adapter behind -metrics-addr; nil: none).
	Metrics metrics.Recorder
	// Notify tunes alert notifications (retries, backoff, PublicURL for
	// console links); Notify.InsecureURLs follows AllowPrivateAgents.
	Notify notify.Options
	// SMTP sends e-mail channels (nil: e-mail channels are refused).
	SMTP *notify.SMTP
	// NotifyHTTPClient overrides the guarded client of webhook, Slack and
	// PagerDuty channels (tests).
	NotifyHTTPClient *http.Client
}

// FeedLagLimit is the change-feed backlog (unacknowledged changes) beyond
// which the embedded store slows committers down (bolt.Options.FeedLagLimit):
// about 3 MB of changes, whose pages stay on the store's free list once the
// feed has caught up, and which every later commit writes with that list.
const FeedLagLimit = 20000

// App is a running embedded runtime.
type App struct {
	Store   *bolt.Store
	Watcher *watcher.Service
	Eval    *evaluation.Service
	Timers  *timers.Timers
	// Window loads the timers with the instants of the next minutes.
	Window  *timers.Window
	Outbox  *outbox.Outbox
	Feed    *feed.Processor
	Handler *httpapi.Handler
	// Credentials keeps agents' outbound credentials, sealed with the key
	// in <DataDir>/credentials-aes256.key.
	Credentials *credentials.Service
	// Notify keeps alert channels and rules and delivers notifications
	// (channel secrets sealed with the credentials key).
	Notify   *notify.Service
	Notifier *notify.Worker

	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    *slog.Logger
	once   sync.Once
}

// Start opens the store and starts the feed, the timers and the outbox. It
// returns without reading the open expectations: in the background it
// replays the unacknowledged feed, loads the timers' window (instants that
// passed while the process was down fire first, oldest first; then the
// next minutes, a minute at a time) and re-enqueues undelivered lapses.
func Start(cfg Config) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.Rules.MaxLineage == 0 {
		retain := cfg.Rules.Retain
		cfg.Rules = expect.DefaultConfig()
		cfg.Rules.Retain = retain
	}
	if cfg.TimerWorkers == 0 {
		cfg.TimerWorkers = 8
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	rec := metrics.Or(cfg.Metrics)
	st, err := bolt.Open(filepath.Join(cfg.DataDir, "clockwork.db"), bolt.Options{NoSync: cfg.NoSync, Timeout: 5 * time.Second,
		FeedLagLimit: FeedLagLimit, OnExpired: func(typ string, n int) { rec.Record(metrics.RecordsExpired, float64(n), typ) }})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	a := &App{Store: st, log: cfg.Log}
	a.Watcher = watcher.New(st, cfg.Now, cfg.Rules)
	a.Watcher.SetMetrics(cfg.Metrics)
	if cfg.Outbox.Metrics == nil {
		cfg.Outbox.Metrics = cfg.Metrics
	}
	sealer, err := credentials.KeyFile(filepath.Join(cfg.DataDir, "credentials-aes256.key"))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("credentials key: %w", err)
	}
	a.Credentials = credentials.New(st, sealer, credentials.Options{})
	sender := cfg.Sender
	if sender == nil {
		client := cfg.AgentHTTPClient
		if client == nil {
			client = netguard.NewHTTPClient(netguard.Guard{AllowPrivate: cfg.AllowPrivateAgents}, 15*time.Second)
		}
		sender = a2aout.NewSender(a2aout.Options{HTTPClient: client, Credentials: a.Credentials})
	}
	// The same client asks watched tasks' agents about them.
	if tr, ok := sender.(watcher.TaskReader); ok {
		a.Watcher.SetTaskReader(tr)
	}
	// And subscribes to them, when agents know where to push
	// (-public-url).
	if sub, ok := sender.(watcher.TaskSubscriber); ok && cfg.Notify.PublicURL != "" {
		a.Watcher.SetWatchPush(strings.TrimSuffix(cfg.Notify.PublicURL, "/"), sub)
	}
	oopt := cfg.Outbox
	oopt.Silenced = func(ctx context.Context, rec *expect.Record) (string, error) {
		return a.Notify.SilencedLapseTask(ctx, rec)
	}
	a.Outbox = outbox.New(a.Watcher, sender, oopt, cfg.Log)
	// The clock's lapse commits are exempt from the feed's backpressure
	// (meant for bulk writers), and the timers keep the watcher's clock, so
	// that the two never disagree on whether an instant has come.
	a.Timers = timers.New(func(ctx context.Context, ins []expect.Instant) ([]expect.Instant, error) {
		return a.Watcher.TickDue(store.WithoutFeedStall(ctx), ins)
	}, cfg.TimerWorkers, cfg.Log)
	a.Timers.SetClock(a.Watcher.Now)
	a.Timers.Lateness = cfg.Lateness
	evalOpt := evaluation.Options{Now: cfg.Now, Watcher: a.Watcher, ReviewClock: a.Watcher, Metrics: cfg.Metrics, JudgeRetry: cfg.JudgeRetry, RetainEvidence: cfg.RetainEvidence,
		EvaluationJudgeRate: cfg.EvaluationJudgeRate}
	j, err := judge.New(context.Background(), judge.Config{Kind: cfg.JudgeKind, URL: cfg.JudgeURL, Model: cfg.JudgeModel,
		Token: cfg.JudgeToken, APIKey: cfg.JudgeAPIKey, AllowPrivate: cfg.AllowPrivateJudge, Metrics: cfg.Metrics})
	if err != nil {
		st.Close()
		return nil, err
	}
	if j != nil {
		evalOpt.Judge = j
		evalOpt.JudgeWithModel = func(model string) (evaluation.Judge, bool) { return judge.WithModel(j, model) }
	}
	if !cfg.NoSigningKey {
		key, err := signingKey(filepath.Join(cfg.DataDir, "verify-ed25519.key"))
		if err != nil {
			st.Close()
			return nil, err
		}
		evalOpt.SigningKey = key
	}
	a.Eval = evaluation.New(st, evalOpt)
	// Model grading runs beside the feed, one job per criterion, so a slow
	// judge never holds the changes behind a PLAN_COMPLETE.
	grading := evaluation.NewGradingWorker(a.Eval, cfg.Log)
	// Evaluations (re-grading stored executions) run in steps beside it.
	evaluations := evaluation.NewEvaluationWorker(a.Eval, cfg.Log)
	nclient := cfg.NotifyHTTPClient
	if nclient == nil {
		nclient = netguard.NewHTTPClient(netguard.Guard{AllowPrivate: cfg.AllowPrivateAgents}, 15*time.Second)
	}
	nopt := cfg.Notify
	nopt.Retain = cfg.Rules.Retain
	nopt.InsecureURLs = nopt.InsecureURLs || cfg.AllowPrivateAgents
	if nopt.Metrics == nil {
		nopt.Metrics = cfg.Metrics
	}
	if nopt.Now == nil {
		nopt.Now = a.Watcher.Now
	}
	nopt.Expectation = a.Watcher.Get
	var mail notify.MailSender
	if cfg.SMTP != nil {
		mail = cfg.SMTP
	}
	a.Notify = notify.New(st, sealer, nclient, mail, nil, nopt, cfg.Log)
	a.Notifier = notify.NewWorker(a.Notify, 8)
	a.Window = &timers.Window{Timers: a.Timers, Source: a.Watcher, Lookahead: cfg.TimerLookahead, Log: cfg.Log}
	a.Feed = &feed.Processor{Scheduler: a.Timers, Outbox: a.Outbox, Watcher: a.Watcher, Tasks: a.Watcher, Watches: a.Watcher, Current: a.Watcher.Get, CurrentItem: st.Get, ScheduleAll: true, Handlers: map[string]feed.Handler{evaluation.TypeExecution: a.Eval},
		Alerts: a.Notify, Metrics: cfg.Metrics, Now: a.Watcher.Now}
	a.Handler = httpapi.New(a.Watcher, a.Eval, cfg.Auth, cfg.Log)
	a.Handler.Credentials = a.Credentials
	a.Handler.Notify = a.Notify
	a.Handler.Metrics = cfg.Metrics
	a.Handler.MCPAllowedOrigins = cfg.MCPAllowedOrigins
	mcpapi.Mount(a.Handler)
	otlpin.Mount(a.Handler, cfg.OTLP)
	a.Handler.Console = console.Assets{}

	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	// The window's end is set before the feed is consumed, so the timers
	// hold only the window from the first change on; the window is loaded
	// in the background (both paths are idempotent).
	a.Window.Prime()
	a.run(func() { a.Window.Run(ctx) })
	// Undelivered lapses are re-enqueued in the background, so a large
	// backlog does not delay serving requests after a restart.
	a.run(func() {
		if err := a.Outbox.Recover(ctx); err != nil && ctx.Err() == nil {
			cfg.Log.Error("recover outbox", "err", err)
		}
	})
	cfg.Log.Info("embedded runtime started", "data", cfg.DataDir, "timerWindowEnd", expect.FormatTime(a.Window.End()))
	a.run(func() { a.Timers.Run(ctx) })
	a.run(func() { a.Outbox.Run(ctx) })
	a.run(func() { grading.Run(ctx) })
	a.run(func() { evaluations.Run(ctx) })
	a.run(func() { a.Notifier.Run(ctx, 0) })
	if !cfg.PauseFeed {
		// A change the feed set aside after its retries is tried again
		// every 30 s, so its effects (VERIFY, alerts, re-anchoring) are
		// not lost to a passing failure.
		a.run(func() { a.retrySetAside(ctx, cfg) })
		// A change still failing after its retries is set aside (kept with
		// the reason, counted) so the changes behind it go on; the
		// window's sweep finds the instants it would have scheduled.
		a.run(func() {
			_ = feed.RunWith(ctx, st, a.Feed, cfg.Log, feed.Options{MaxAttempts: feed.DefaultMaxAttempts, Lanes: feed.DefaultLanes, SetAside: feed.SetAsideInStore(st, cfg.Metrics, a.Watcher.Now, cfg.Rules.Retain)})
		})
	}
	return a, nil
}

// retrySetAside tries again, every 30 seconds, the changes the feed set
// aside (feed.RetrySetAside). The embedded feed loses no change it has not
// processed (it replays what it had not acknowledged after a crash), so
// these are the only effects that could otherwise be lost, and its commits
// need no effect markers (those are AWS's, whose stream may discard).
func (a *App) retrySetAside(ctx context.Context, cfg Config) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := feed.RetrySetAside(ctx, a.Store, a.Feed.Handle, 1000)
		if n > 0 {
			cfg.Log.Warn("redid the effects of changes the feed had set aside", "changes", n)
			metrics.Or(cfg.Metrics).Record(metrics.EffectsRepaired, float64(n))
		}
		if err != nil && ctx.Err() == nil {
			cfg.Log.Error("retrying changes set aside", "err", err)
		}
	}
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

// signingKey loads the VERIFY signing key, creating it on first start.
func signingKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("signing key %s is malformed", path)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if !os.IsNotExist(err) {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key.Seed())+"\n"), 0o600); err != nil {
		return nil, err
	}
	return key, nil
}
