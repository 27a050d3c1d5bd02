// Command local runs the whole service in one process with no AWS: the
// embedded store under -data, in-process timers and change feed, lapse
// delivery, and the HTTP API on -addr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/retention"
	"github.com/agentclock/clockwork/internal/retry"

	"github.com/agentclock/clockwork/internal/awsclient"

	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/awsrt/awsjudge"
	"github.com/agentclock/clockwork/internal/console"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/mcpapi"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/prom"
	"github.com/agentclock/clockwork/internal/notify"
	"github.com/agentclock/clockwork/internal/otlpin"
	"github.com/agentclock/clockwork/internal/outbox"
	"github.com/agentclock/clockwork/internal/serve"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	data := flag.String("data", "./data", "directory of the embedded store")
	tokens := flag.String("tokens", "", `tokens file {"tokens":[{"token","principal","scopes":[...],"agents":[...]}]}; without it a token with every scope is generated and printed, and the server listens on loopback only`)
	maxLineage := flag.Int("max-lineage", 16, "bound on supersede lineage")
	allowPrivate := flag.Bool("allow-private-agents", false, "let lapse tasks reach agents on loopback and private addresses (default: true in the first session, without -tokens on loopback; false otherwise)")
	timekeepers := flag.Bool("send-to-timekeepers", false, "send lapse tasks also to agents whose card says keepsTime: true")
	attempts := flag.Int("delivery-attempts", 0, "when positive, also dead-letter a lapse task or notification after this many attempts (0: -delivery-retry-for alone)")
	retryFor := flag.Duration("delivery-retry-for", retry.DefaultFor, "how long lapse tasks and notifications are retried from their first failure before they are dead-lettered")
	maxWait := flag.Duration("delivery-max-wait", retry.DefaultCeiling, "the longest wait between two attempts at a lapse task or notification (waits grow with the time spent failing, up to this)")
	level := flag.String("log-level", "info", "debug, info, warn or error")
	judgeURL := flag.String("judge-url", "", "model judge endpoint for HEURISTIC criteria (none: they stay PENDING)")
	judgeToken := flag.String("judge-token", "", "bearer token sent to the judge")
	allowPrivateJudge := flag.Bool("allow-private-judge", false, "let the judge be on loopback or a private address (default: as -allow-private-agents)")
	streamFaults := flag.Bool("aws-stream-faults", false, "AWS mode, for tests: the stream poller delivers records out of order across items, 10% twice, and cuts 10% of batches off mid-way as a timed-out function would")
	judgeKind := flag.String("judge", "", "kind of model judge: http (this project's judge protocol at -judge-url; the default when -judge-url is given), openai (an OpenAI-compatible Chat Completions API at base URL -judge-url, key in $JUDGE_API_KEY), bedrock (Amazon Bedrock Converse; -judge-url overrides its endpoint)")
	judgeModel := flag.String("judge-model", "", "model of the openai judge, model id of the bedrock judge")
	scoresChannel := flag.String("scores-channel", "", "an operator's channel (an otlp one, typically) that every agent's verification.completed goes to: its scores as gen_ai.evaluation.result events")
	evalJudgeRate := flag.Float64("evaluation-judge-rate", evaluation.DefaultEvaluationJudgeRate, "judge calls per second evaluations (re-grading) may make")
	awsEndpoint := flag.String("aws-endpoint", "", "AWS mode: run the Lambda handlers against this endpoint (LocalStack http://127.0.0.1:4566, moto); polls the table's stream and fires due schedules")
	table := flag.String("table", "clockwork", "AWS mode: DynamoDB table (created if missing)")
	group := flag.String("schedule-group", "clockwork", "AWS mode: EventBridge Scheduler group (created if missing)")
	clockARN := flag.String("clock-function-arn", "arn:aws:lambda:us-east-1:000000000000:function:clockwork-clock", "AWS mode: Scheduler target")
	roleARN := flag.String("scheduler-role-arn", "arn:aws:iam::000000000000:role/clockwork-scheduler", "AWS mode: role Scheduler assumes")
	timerQueue := flag.String("timer-queue", "", `AWS mode: SQS timer queue of the clock (default <table>-timers; created if missing, with <name>-dlq); "off": one schedule per instant, whose early fires are lost`)
	gradingQueue := flag.String("grading-queue", "", `AWS mode: SQS queue of grading jobs, which the grader function consumes (default <table>-grading; created if missing, with <name>-dlq); "off": HEURISTIC criteria graded by a model judge stay PENDING`)
	precision := flag.Duration("scheduler-precision", 60*time.Second, "AWS mode: the Scheduler firing precision the clock plans for and the emulated Scheduler has")
	schedulerFaults := flag.Bool("scheduler-faults", false, "AWS mode: the emulated Scheduler fires each schedule anywhere from precision-1s early to precision late, a fifth twice, one in twenty never")
	tlsCert := flag.String("tls-cert", "", "PEM certificate (chain) to serve HTTPS with; reloaded when the file changes")
	tlsKey := flag.String("tls-key", "", "PEM private key of -tls-cert")
	behindProxy := flag.Bool("behind-proxy", false, "a TLS proxy terminates in front: serve plain HTTP beyond loopback, and refuse requests without X-Forwarded-Proto: https")
	mcpOrigins := flag.String("mcp-allowed-origins", "", "comma-separated browser origins (https://host:port) that may call /mcp; requests with any other Origin are refused")
	smtpURL := flag.String("smtp", "", "SMTP server of e-mail alert channels, smtp://[user@]host[:port] (port 587 by default; the password in $SMTP_PASSWORD; STARTTLS when offered); none: e-mail channels are refused")
	smtpFrom := flag.String("smtp-from", "", "sender address of e-mail alert channels (required with -smtp)")
	publicURL := flag.String("public-url", "", "this server's public base URL (https://clockwork.example.com), for console links in Slack, e-mail and PagerDuty notifications, and where the agents of watched tasks push their updates")
	retainExpectations := flag.String("retain-expectations", "P90D", "how long an expectation record is kept once final (satisfied, withdrawn, lapsed with its task delivered or dead-lettered), counted from then: a Go (2160h) or ISO 8601 (P90D) duration, 0 forever")
	retainEvidence := flag.String("retain-evidence", "P400D", "how long a completed plan's evidence (ANTICIPATEs, events, VERIFYs, bundle) is kept after PLAN_COMPLETE: a Go or ISO 8601 duration, 0 forever")
	factLookbackMax := flag.String("fact-lookback-max", "PT24H", "the longest satisfiedBy.lookback or refutedBy.lookback an expectation may ask for, and how long accepted facts are remembered for it: a Go or ISO 8601 duration, 0 turns lookback off")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics at /metrics on this address, a listener of its own without authentication (none: off)")
	otlpCfg := otlpin.DefaultConfig()
	otlpCfg.RegisterFlags(flag.CommandLine)
	flag.Parse()

	keepRecords, err := retention.Parse(*retainExpectations)
	if err != nil {
		return fmt.Errorf("-retain-expectations: %w", err)
	}
	keepEvidence, err := retention.Parse(*retainEvidence)
	if err != nil {
		return fmt.Errorf("-retain-evidence: %w", err)
	}
	lookbackMax, err := retention.Parse(*factLookbackMax)
	if err != nil {
		return fmt.Errorf("-fact-lookback-max: %w", err)
	}
	awsLookbackMax := lookbackMax
	if awsLookbackMax == 0 {
		awsLookbackMax = -1 // off (awsrt.Config: zero is the default)
	}

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	listen := serve.Listen{Addr: *addr, Tokens: *tokens != "", CertFile: *tlsCert, KeyFile: *tlsKey, BehindProxy: *behindProxy}
	if err := listen.Check(); err != nil {
		return err
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["allow-private-agents"] {
		*allowPrivate = listen.PrivateByDefault()
	}
	if !set["allow-private-judge"] {
		*allowPrivateJudge = *allowPrivate
	}
	var allowedOrigins []string
	for _, o := range strings.Split(*mcpOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowedOrigins = append(allowedOrigins, o)
		}
	}

	var mailer *notify.SMTP
	if *smtpURL != "" {
		m, err := notify.ParseSMTP(*smtpURL, os.Getenv("SMTP_PASSWORD"), *smtpFrom)
		if err != nil {
			return err
		}
		mailer = m
	}

	var authn *auth.Authenticator
	var generated string
	if *tokens != "" {
		a, err := auth.Load(*tokens)
		if err != nil {
			return fmt.Errorf("-tokens: %w", err)
		}
		authn = a
	} else {
		generated = auth.Generate()
		authn, _ = auth.New([]auth.TokenSpec{{Token: generated, Principal: "local", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	}

	var promRec *prom.Recorder
	var rec metrics.Recorder // nil: no metrics
	if *metricsAddr != "" {
		promRec = prom.New()
		rec = promRec
	}

	var handler http.Handler
	var closeRuntime func() error
	if *awsEndpoint != "" {
		tokensJSON := ""
		if *tokens != "" {
			b, err := os.ReadFile(*tokens)
			if err != nil {
				return err
			}
			tokensJSON = string(b)
		} else {
			b, _ := json.Marshal(auth.File{Tokens: []auth.TokenSpec{{Token: generated, Principal: "local", Scopes: auth.AllScopes, Agents: []string{"*"}}}})
			tokensJSON = string(b)
		}
		var queueURL string
		if *timerQueue == "" {
			*timerQueue = *table + "-timers"
		}
		if *timerQueue != "off" {
			ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: *awsEndpoint})
			if err != nil {
				return err
			}
			q, err := awsrt.CreateTimerQueue(context.Background(), awsclient.NewSQSSender(ac), *timerQueue)
			if err != nil {
				return err
			}
			queueURL = q.URL
		}
		// The grading queue, as the stack creates it: without it a model
		// judge is never called.
		var gradingURL string
		if *gradingQueue == "" {
			*gradingQueue = *table + "-grading"
		}
		if *gradingQueue != "off" {
			ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: *awsEndpoint})
			if err != nil {
				return err
			}
			q, err := awsrt.CreateGradingQueue(context.Background(), awsclient.NewSQSSender(ac), *gradingQueue)
			if err != nil {
				return err
			}
			gradingURL = q.URL
		}
		// Outbound credentials are sealed with a KMS key: the one named by
		// CREDENTIALS_KEY_ID, else one the local AWS mode creates (or finds)
		// as alias/<table>-credentials, as it creates the table and queues.
		keyID := os.Getenv("CREDENTIALS_KEY_ID")
		if keyID == "" {
			ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: *awsEndpoint})
			if err != nil {
				return err
			}
			if keyID, err = (&credentials.KMSClient{Config: ac}).EnsureKey(context.Background(), "alias/"+*table+"-credentials"); err != nil {
				return fmt.Errorf("the credentials key (set CREDENTIALS_KEY_ID to use an existing one): %w", err)
			}
		}
		rt, err := awsrt.New(context.Background(), awsrt.Config{CredentialsKeyID: keyID, Notify: notify.Options{ScoresChannel: *scoresChannel},
			Table: *table, ScheduleGroup: *group, ClockFunctionARN: *clockARN, SchedulerRoleARN: *roleARN, TimerQueueURL: queueURL, GradingQueueURL: gradingURL, SchedulerPrecision: *precision,
			TokensJSON: tokensJSON, AllowPrivateAgents: *allowPrivate, SendToTimekeepers: *timekeepers, MCPAllowedOrigins: allowedOrigins,
			MaxLineage: *maxLineage, DeliveryAttempts: *attempts, DeliveryRetryFor: *retryFor, DeliveryMaxWait: *maxWait, RetainExpectations: keepRecords, RetainEvidence: keepEvidence, FactLookbackMax: awsLookbackMax, JudgeURL: *judgeURL, JudgeToken: *judgeToken,
			JudgeKind: *judgeKind, JudgeModel: *judgeModel, JudgeAPIKey: os.Getenv("JUDGE_API_KEY"), Judges: awsjudge.New, EvaluationJudgeRate: *evalJudgeRate,
			Endpoint: *awsEndpoint, Stage: "local", Log: log, Metrics: rec,
		})
		if err != nil {
			return err
		}
		// The stream poller keeps its position under -data, as the event
		// source mapping keeps its checkpoint, so a restart resumes rather
		// than replays the whole stream.
		if err := os.MkdirAll(*data, 0o700); err != nil {
			return err
		}
		checkpoint := filepath.Join(*data, "stream-"+*table+".checkpoint.json")
		opts := awsrt.LocalOptions{Create: true, Checkpoint: checkpoint}
		if *streamFaults {
			opts.StreamFaults = &awsrt.StreamFaults{Reorder: true, Duplicate: 0.1, Cut: 0.1}
		}
		if *schedulerFaults {
			opts.SchedulerFaults = awsrt.FaultsFor(*precision)
		}
		local, err := awsrt.StartLocal(rt, opts)
		if err != nil {
			return err
		}
		mcpapi.Mount(rt.API())
		// On AWS the ingest function serves /v1/traces; locally, the API.
		otlpin.Mount(rt.API(), otlpCfg)
		rt.API().Console = console.Assets{}
		handler = rt.HTTP()
		closeRuntime = func() error { local.Close(); return nil }
		log.Info("AWS mode", "endpoint", *awsEndpoint, "table", *table, "scheduleGroup", *group)
	} else {
		app.TuneGC()
		rules := expect.DefaultConfig()
		rules.MaxLineage = *maxLineage
		rules.Retain = keepRecords
		rules.FactLookbackMax = lookbackMax
		a, err := app.Start(app.Config{RetainEvidence: keepEvidence,
			DataDir: *data, Auth: authn, Log: log, Rules: rules,
			AllowPrivateAgents: *allowPrivate, MCPAllowedOrigins: allowedOrigins,
			Outbox:   outbox.Options{MaxAttempts: *attempts, RetryFor: *retryFor, MaxBackoff: *maxWait, SendToTimekeepers: *timekeepers},
			JudgeURL: *judgeURL, JudgeToken: *judgeToken, AllowPrivateJudge: *allowPrivateJudge,
			JudgeKind: *judgeKind, JudgeModel: *judgeModel, JudgeAPIKey: os.Getenv("JUDGE_API_KEY"), EvaluationJudgeRate: *evalJudgeRate,
			Metrics: rec, SMTP: mailer, OTLP: otlpCfg, Notify: notify.Options{PublicURL: *publicURL, MaxAttempts: *attempts, RetryFor: *retryFor, MaxBackoff: *maxWait, ScoresChannel: *scoresChannel},
		})
		if err != nil {
			return err
		}
		handler = a.Handler
		closeRuntime = a.Close
		if promRec != nil {
			promRec.GaugeFunc(metrics.StoreFileBytes, func() float64 { return float64(a.Store.DiskBytes()) })
		}
	}
	raw, err := net.Listen("tcp", *addr)
	if err != nil {
		closeRuntime()
		return err
	}
	ln, err := listen.Wrap(raw, log)
	if err != nil {
		raw.Close()
		closeRuntime()
		return err
	}
	srv := &http.Server{Handler: listen.Handler(handler), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	fmt.Printf("clockwork listening on %s://%s (data in %s)\n", listen.Scheme(), ln.Addr(), *data)
	fmt.Printf("web console: %s://%s/console\n", listen.Scheme(), ln.Addr())
	if generated != "" {
		fmt.Printf("token (every scope, every agent; printed once): %s\n", generated)
	}
	log.Info("listening", "addr", ln.Addr().String(), "data", *data)
	if promRec != nil {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			closeRuntime()
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promRec.Handler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		fmt.Printf("metrics on http://%s/metrics\n", mln.Addr())
		log.Info("metrics", "addr", mln.Addr().String())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		closeRuntime()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("shutdown", "err", err)
	}
	return closeRuntime()
}
