// Package awsrt assembles the AWS runtime: the DynamoDB store, the
// EventBridge Scheduler clock, the watcher and evaluation services, the
// HTTP API and the change-feed processor, configured from environment
// variables. The Lambda mains (functions/api, functions/clock,
// functions/stream) and the local server's AWS mode only call into it.
package awsrt

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/retention"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/smithy-go/middleware"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/authorizer"
	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/emf"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/notify"
	"github.com/agentclock/clockwork/internal/outbox"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/watcher"
)

// Config is the runtime's configuration. FromEnv reads it from the
// environment variables named in each field's comment.
type Config struct {
	Table            string // TABLE_NAME (required)
	ScheduleGroup    string // SCHEDULE_GROUP (required by clock and stream)
	ClockFunctionARN string // CLOCK_FUNCTION_ARN: the Scheduler target
	SchedulerRoleARN string // SCHEDULER_ROLE_ARN: the role Scheduler assumes
	SchedulerDLQARN  string // SCHEDULER_DLQ_ARN: dead letters of the targets
	// TimerQueueURL (TIMER_QUEUE_URL) is the SQS queue whose consumer is the
	// clock function: instants go on it with a message timer, so a lapse
	// lands within seconds of its instant instead of Scheduler's minute
	// (internal/scheduler, queue.go). Empty: the former design, one
	// schedule per instant, whose early fires are lost.
	TimerQueueURL string
	// GradingQueueURL (GRADING_QUEUE_URL) is the SQS queue of grading jobs
	// (one per HEURISTIC criterion waiting for the model judge), consumed
	// by the grader function (HandleGrading); the stream function puts
	// VERIFY's jobs on it, the clock function's sweep the late ones.
	GradingQueueURL string
	// ModelGrading (MODEL_GRADING) says a model judge grades HEURISTIC
	// criteria somewhere (the grader function), so VERIFY leaves them
	// waiting for it even in a function that holds no judge.
	ModelGrading bool
	// JudgeRetry bounds the judge's attempts at each criterion (zero:
	// evaluation's defaults; tests shorten it).
	JudgeRetry evaluation.JudgeRetry
	// EvaluationJudgeRate (EVALUATION_JUDGE_RATE) bounds the judge calls
	// evaluations make per second in each grader invocation (zero:
	// evaluation's default).
	EvaluationJudgeRate float64
	// GradingRepairAfter is how late a grading job must be before the
	// sweep enqueues it again (default DefaultGradingRepairAfter).
	GradingRepairAfter time.Duration
	// EffectsRepairAfter is how old a change's effect marker must be
	// before the sweep redoes its effects (default DefaultEffectsRepairAfter).
	EffectsRepairAfter time.Duration
	// SchedulerPrecision is Scheduler's firing precision (default 60 s);
	// the local AWS mode scales it down, with its emulated Scheduler, so
	// that tests stay fast.
	SchedulerPrecision time.Duration
	// DirectWindow: instants due within it skip Scheduler for the queue
	// (at most 15 min, SQS's longest timer; default none: only those too
	// near for a schedule before them do).
	DirectWindow time.Duration
	// SweepAfter is how long past its time an open instant must be before
	// the sweep processes it (default DefaultSweepAfter).
	SweepAfter time.Duration
	// TokensParameter names an SSM SecureString holding the tokens JSON
	// (TOKENS_PARAMETER); TokensJSON holds it directly (TOKENS_JSON, for
	// local runs). Entries should carry tokenSha256, never plain tokens.
	TokensParameter, TokensJSON string
	// TrustAuthorizer (TRUST_AUTHORIZER, the deployed API function) takes
	// the principal from API Gateway's Lambda authorizer instead of checking
	// tokens (internal/authorizer); the tokens settings are then unused.
	TrustAuthorizer    bool
	AllowPrivateAgents bool // ALLOW_PRIVATE_AGENTS (default false)
	// MCPAllowedOrigins (MCP_ALLOWED_ORIGINS, comma-separated) are the
	// browser origins that may call /mcp (httpapi.Handler).
	MCPAllowedOrigins []string
	SendToTimekeepers bool // SEND_TO_TIMEKEEPERS (default false)
	MaxLineage        int  // MAX_LINEAGE (default 16)
	// FactLookbackMax (FACT_LOOKBACK_MAX, default PT24H; "0" off) bounds
	// satisfiedBy.lookback and is how long accepted facts are remembered
	// for it. Zero here means the default, negative off.
	FactLookbackMax time.Duration
	// RetainExpectations (RETAIN_EXPECTATIONS, default P90D) and
	// RetainEvidence (RETAIN_EVIDENCE, default P400D) are the retention of
	// final records and of completed plans' evidence, Go or ISO 8601
	// durations, 0 forever (retention.Parse). A Config made in code
	// keeps forever unless set.
	RetainExpectations, RetainEvidence time.Duration
	DeliveryAttempts                   int // DELIVERY_ATTEMPTS (default 0: the retry window alone)
	// DeliveryRetryFor is how long lapse tasks and notifications are
	// retried from their first failure (DELIVERY_RETRY_FOR, a Go duration;
	// default retry.DefaultFor, a day).
	DeliveryRetryFor time.Duration
	// DeliveryMaxWait bounds the wait between two delivery attempts
	// (DELIVERY_MAX_WAIT, a Go duration; default retry.DefaultCeiling).
	DeliveryMaxWait      time.Duration
	JudgeURL, JudgeToken string // JUDGE_URL, JUDGE_TOKEN
	// JudgeKind (JUDGE_KIND: http, openai, bedrock) and JudgeModel
	// (JUDGE_MODEL) choose the judge (judge.Config); for bedrock JUDGE_URL
	// overrides the service endpoint (emulators and tests only). The
	// OpenAI-compatible endpoint's key is read from the SSM SecureString
	// named by JUDGE_API_KEY_PARAMETER, or given as JUDGE_API_KEY (local
	// runs).
	JudgeKind, JudgeModel             string
	JudgeAPIKey, JudgeAPIKeyParameter string
	// Judges builds the judge the settings above name (awsjudge.New for
	// the grader function, the only one that calls it); nil refuses a
	// configured judge.
	Judges   JudgeFactory
	Endpoint string // AWS_ENDPOINT_URL: an emulator (LocalStack, moto)
	Stage    string // STAGE
	// DeliveryTimeout bounds one delivery attempt (zero: the outbox's
	// default, 10s; tests shorten it).
	DeliveryTimeout time.Duration
	// SigningKey signs VERIFY messages (Ed25519); FromEnv reads its hex
	// seed from the SSM SecureString named by SIGNING_KEY_PARAMETER.
	SigningKey          ed25519.PrivateKey
	SigningKeyParameter string
	// CredentialsKeyID (CREDENTIALS_KEY_ID) is the KMS key that seals
	// agents' outbound credentials (envelope encryption); without it the
	// credentials routes answer 503 to a PUT and lapse tasks carry none.
	CredentialsKeyID string
	// AgentHTTPClient overrides the guarded client lapse tasks are sent
	// with (tests use it to trust a test CA).
	AgentHTTPClient *http.Client
	// SESFrom (SES_FROM) is the verified SES identity e-mail channels are
	// sent from; without it e-mail channels are refused.
	SESFrom string
	// EventBridgeAlerts (EVENTBRIDGE_ALERTS) lets eventbridge channels be
	// configured (the functions' role may put events on the buses).
	EventBridgeAlerts bool
	// PublicURL (PUBLIC_URL) is the API's public base URL, for console
	// links in notifications.
	PublicURL string
	// Notify tunes notification delivery (retries and backoff; tests
	// shorten them).
	Notify notify.Options
	// APIOptions are added to every AWS client (call counting in tests).
	APIOptions []func(*middleware.Stack) error
	// AWSHTTPClient, when set, sends every AWS request (tests record them
	// with awsops.Recorder).
	AWSHTTPClient aws.HTTPClient
	// Now is the watcher's clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
	// Metrics receives the services' measurements (the Lambdas: an EMF
	// recorder flushed to stdout after each invocation; nil: none).
	Metrics metrics.Recorder
	// MetricsNamespace (METRICS_NAMESPACE) is the CloudWatch namespace of
	// the Lambdas' metrics (default emf.DefaultNamespace).
	MetricsNamespace string
}

// FromEnv reads the configuration. A missing TABLE_NAME or a malformed
// number is an error naming the variable.
func FromEnv() (Config, error) {
	c := Config{
		Table: os.Getenv("TABLE_NAME"), ScheduleGroup: os.Getenv("SCHEDULE_GROUP"),
		ClockFunctionARN: os.Getenv("CLOCK_FUNCTION_ARN"), SchedulerRoleARN: os.Getenv("SCHEDULER_ROLE_ARN"),
		SchedulerDLQARN: os.Getenv("SCHEDULER_DLQ_ARN"), TokensParameter: os.Getenv("TOKENS_PARAMETER"),
		TokensJSON: os.Getenv("TOKENS_JSON"), JudgeURL: os.Getenv("JUDGE_URL"), JudgeToken: os.Getenv("JUDGE_TOKEN"),
		Endpoint: os.Getenv("AWS_ENDPOINT_URL"), Stage: os.Getenv("STAGE"),
		SigningKeyParameter: os.Getenv("SIGNING_KEY_PARAMETER"),
		JudgeKind:           os.Getenv("JUDGE_KIND"), JudgeModel: os.Getenv("JUDGE_MODEL"),
		JudgeAPIKey: os.Getenv("JUDGE_API_KEY"), JudgeAPIKeyParameter: os.Getenv("JUDGE_API_KEY_PARAMETER"),
		CredentialsKeyID: os.Getenv("CREDENTIALS_KEY_ID"),
		TimerQueueURL:    os.Getenv("TIMER_QUEUE_URL"),
		GradingQueueURL:  os.Getenv("GRADING_QUEUE_URL"),
		MetricsNamespace: os.Getenv("METRICS_NAMESPACE"),
		SESFrom:          os.Getenv("SES_FROM"), PublicURL: os.Getenv("PUBLIC_URL"),
	}
	c.Notify.ScoresChannel = os.Getenv("SCORES_CHANNEL")
	if c.Table == "" {
		return c, errors.New("TABLE_NAME is required")
	}
	var err error
	if c.AllowPrivateAgents, err = envBool("ALLOW_PRIVATE_AGENTS"); err != nil {
		return c, err
	}
	if c.TrustAuthorizer, err = envBool("TRUST_AUTHORIZER"); err != nil {
		return c, err
	}
	if c.ModelGrading, err = envBool("MODEL_GRADING"); err != nil {
		return c, err
	}
	if v := os.Getenv("EVALUATION_JUDGE_RATE"); v != "" {
		if c.EvaluationJudgeRate, err = strconv.ParseFloat(v, 64); err != nil || c.EvaluationJudgeRate <= 0 || math.IsInf(c.EvaluationJudgeRate, 0) {
			return c, fmt.Errorf("EVALUATION_JUDGE_RATE %q: want a positive number of calls per second", v)
		}
	}
	if c.EventBridgeAlerts, err = envBool("EVENTBRIDGE_ALERTS"); err != nil {
		return c, err
	}
	if c.SendToTimekeepers, err = envBool("SEND_TO_TIMEKEEPERS"); err != nil {
		return c, err
	}
	if c.MaxLineage, err = envInt("MAX_LINEAGE", 16); err != nil {
		return c, err
	}
	if c.RetainExpectations, err = envRetention("RETAIN_EXPECTATIONS", retention.DefaultExpectations); err != nil {
		return c, err
	}
	if c.FactLookbackMax, err = envRetention("FACT_LOOKBACK_MAX", "PT24H"); err != nil {
		return c, err
	} else if c.FactLookbackMax == 0 {
		c.FactLookbackMax = -1 // "0": off
	}
	if c.RetainEvidence, err = envRetention("RETAIN_EVIDENCE", retention.DefaultEvidence); err != nil {
		return c, err
	}
	if v := os.Getenv("DELIVERY_ATTEMPTS"); v != "" {
		if c.DeliveryAttempts, err = envInt("DELIVERY_ATTEMPTS", 0); err != nil {
			return c, err
		}
	}
	if v := os.Getenv("DELIVERY_MAX_WAIT"); v != "" {
		if c.DeliveryMaxWait, err = time.ParseDuration(v); err != nil || c.DeliveryMaxWait <= 0 {
			return c, fmt.Errorf("DELIVERY_MAX_WAIT: %q is not a positive duration (e.g. 1h)", v)
		}
	}
	if v := os.Getenv("DELIVERY_RETRY_FOR"); v != "" {
		if c.DeliveryRetryFor, err = time.ParseDuration(v); err != nil || c.DeliveryRetryFor <= 0 {
			return c, fmt.Errorf("DELIVERY_RETRY_FOR: %q is not a positive duration (e.g. 24h)", v)
		}
	}
	for _, o := range strings.Split(os.Getenv("MCP_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.MCPAllowedOrigins = append(c.MCPAllowedOrigins, o)
		}
	}
	return c, nil
}

func envBool(name string) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean", name, v)
	}
	return b, nil
}

// envRetention reads a retention setting (retention.Parse), def when
// unset.
func envRetention(name, def string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	d, err := retention.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", name, v)
	}
	return n, nil
}

// Runtime holds the assembled parts.
type Runtime struct {
	Config    Config
	AWS       aws.Config
	DynamoDB  *dynamodb.Client
	Streams   *dynamodbstreams.Client
	Scheduler *awsscheduler.Client
	// SQS sends to the timer queue (a hand-written SendMessage: the SDK's
	// SQS client is linked only into the local AWS mode).
	SQS     *awsclient.SQSSender
	Store   *dynamo.Store
	Watcher *watcher.Service
	Eval    *evaluation.Service
	Clock   *scheduler.Clock
	Outbox  *outbox.Outbox
	Feed    *feed.Processor
	// Handler is the HTTP API, assembled by API (nil until then).
	Handler *httpapi.Handler
	// Credentials keeps agents' outbound credentials sealed with KMS.
	Credentials *credentials.Service
	// Notify keeps alert channels and rules and delivers notifications.
	Notify *notify.Service
	Log    *slog.Logger
	// EMF holds the metrics of the invocation under way, when the runtime
	// records them as CloudWatch Embedded Metric Format (MustStart: the
	// Lambdas); the mains flush it after each invocation (emf.FlushAfter).
	EMF *emf.Recorder

	inline *inlineOutbox
	// sealer seals credentials and channel secrets (nil without a key).
	sealer credentials.Sealer
	// authn authenticates the HTTP API's requests; handlerOnce assembles
	// the API (API).
	authn       httpapi.Authenticator
	handlerOnce sync.Once
}

// AWSConfig loads the SDK configuration, pointed at cfg.Endpoint when set
// (see awsclient.Config).
func AWSConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	ac, err := awsclient.Config(ctx, cfg.Endpoint, cfg.APIOptions...)
	if err == nil && cfg.AWSHTTPClient != nil {
		ac.HTTPClient = cfg.AWSHTTPClient
	}
	return ac, err
}

// New assembles the runtime. Errors name what is missing or unreachable.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	r, err := newCore(ctx, cfg, newJudge)
	if err != nil {
		return nil, err
	}
	r.startWorkers()
	return r, nil
}

// NewAPI assembles what the API function serves: the store, the watcher
// and evaluation services and the HTTP handler. The API never grades,
// delivers lapse tasks nor schedules instants (the stream and clock
// functions do), so the runtime has no judge, outbox, clock or feed, and
// the API bootstrap links neither the model judges (Bedrock), the A2A
// sender nor the Scheduler, Streams and SQS clients: that keeps it within
// its size budget (functions/lambdatest) with the MCP endpoint added.
// Errors are New's.
func NewAPI(ctx context.Context, cfg Config) (*Runtime, error) {
	return newCore(ctx, cfg, nil)
}

// newJudge builds the model judge the configuration names (nil for none).
func newJudge(ctx context.Context, r *Runtime) (evaluation.Judge, error) {
	cfg := r.Config
	if cfg.JudgeAPIKey == "" && cfg.JudgeAPIKeyParameter != "" {
		key, err := r.parameter(ctx, cfg.JudgeAPIKeyParameter)
		if err != nil {
			return nil, fmt.Errorf("JUDGE_API_KEY_PARAMETER: %w", err)
		}
		cfg.JudgeAPIKey = strings.TrimSpace(key)
	}
	settings := JudgeSettings{Kind: cfg.JudgeKind, URL: cfg.JudgeURL, Model: cfg.JudgeModel, Token: cfg.JudgeToken,
		APIKey: cfg.JudgeAPIKey, AllowPrivate: cfg.AllowPrivateAgents, AWS: r.AWS, Metrics: cfg.Metrics}
	if cfg.Judges == nil {
		if settings.Kind != "" || settings.URL != "" {
			return nil, fmt.Errorf("JUDGE_KIND/JUDGE_URL: a judge is configured but this runtime was assembled without Config.Judges (awsjudge.New)")
		}
		return nil, nil
	}
	j, err := cfg.Judges(ctx, settings)
	if err != nil {
		return nil, fmt.Errorf("JUDGE_KIND: %w", err)
	}
	return j, nil
}

// JudgeSettings is what a JudgeFactory builds a model judge from: the
// runtime's JUDGE_* configuration (the API key already read from SSM) and
// its AWS configuration (for Bedrock).
type JudgeSettings struct {
	Kind, URL, Model, Token, APIKey string
	AllowPrivate                    bool
	AWS                             aws.Config
	// Metrics counts the judge's calls, failures and latency.
	Metrics metrics.Recorder
}

// JudgeFactory builds the model judge that settings name, or returns nil
// when they name none; an error says which setting is wrong. The runtime
// takes it from its caller (package awsjudge has the one the functions
// use) rather than importing the model clients itself, so that the API
// function, which never grades, links none of them (Bedrock Runtime alone
// is about 0.5 MB of its bootstrap).
type JudgeFactory func(ctx context.Context, settings JudgeSettings) (evaluation.Judge, error)

// newCore assembles the store, the services and the HTTP handler; judge,
// when not nil, builds the evaluation service's model judge.
func newCore(ctx context.Context, cfg Config, judge func(context.Context, *Runtime) (evaluation.Judge, error)) (*Runtime, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.MaxLineage == 0 {
		cfg.MaxLineage = 16
	}
	ac, err := AWSConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("aws configuration: %w", err)
	}
	r := &Runtime{Config: cfg, AWS: ac, Log: cfg.Log}
	r.DynamoDB = dynamodb.NewFromConfig(ac)
	r.Store = dynamo.New(r.DynamoDB, cfg.Table)
	rules := expect.DefaultConfig()
	rules.MaxLineage = cfg.MaxLineage
	rules.Retain = cfg.RetainExpectations
	switch {
	case cfg.FactLookbackMax > 0:
		rules.FactLookbackMax = cfg.FactLookbackMax
	case cfg.FactLookbackMax < 0:
		rules.FactLookbackMax = 0
	}
	r.Watcher = watcher.New(r.Store, cfg.Now, rules)
	// The stream may discard a change's record: the effects it must not
	// lose are marked in the change's commit (package effects).
	r.Watcher.MarkEffects(true)
	r.Watcher.SetMetrics(cfg.Metrics)

	evalOpt := evaluation.Options{Now: cfg.Now, MarkEffects: true, Watcher: r.Watcher, ReviewClock: r.Watcher, Metrics: cfg.Metrics, ModelGrading: cfg.ModelGrading, JudgeRetry: cfg.JudgeRetry, EvaluationJudgeRate: cfg.EvaluationJudgeRate,
		RetainEvidence: cfg.RetainEvidence}
	if judge != nil {
		j, err := judge(ctx, r)
		if err != nil {
			return nil, err
		}
		if j != nil {
			evalOpt.Judge = j
			if m, ok := j.(interface {
				WithModel(string) (evaluation.Judge, bool)
			}); ok {
				evalOpt.JudgeWithModel = m.WithModel
			}
		}
	}
	if cfg.SigningKey == nil && cfg.SigningKeyParameter != "" {
		seed, err := r.parameter(ctx, cfg.SigningKeyParameter)
		if err != nil {
			return nil, fmt.Errorf("SIGNING_KEY_PARAMETER: %w", err)
		}
		b, err := hex.DecodeString(strings.TrimSpace(seed))
		if err != nil || len(b) != ed25519.SeedSize {
			return nil, fmt.Errorf("SIGNING_KEY_PARAMETER %s: not a hex Ed25519 seed of %d bytes", cfg.SigningKeyParameter, ed25519.SeedSize)
		}
		cfg.SigningKey = ed25519.NewKeyFromSeed(b)
	}
	evalOpt.SigningKey = cfg.SigningKey
	r.Eval = evaluation.New(r.Store, evalOpt)
	if cfg.GradingQueueURL != "" {
		// Evaluations start from the API and go on in the grader.
		r.SQS = awsclient.NewSQSSender(ac)
		r.Eval.SetEvaluator(r.evaluator())
	}

	var sealer credentials.Sealer
	if cfg.CredentialsKeyID != "" {
		sealer = &credentials.KMS{Client: &credentials.KMSClient{Config: ac}, KeyID: cfg.CredentialsKeyID}
	}
	r.Credentials = credentials.New(r.Store, sealer, credentials.Options{})
	r.sealer = sealer

	r.authn = authorizer.Gateway{Log: cfg.Log}
	if !cfg.TrustAuthorizer {
		tokens, err := r.authenticator(ctx)
		if err != nil {
			return nil, err
		}
		r.authn = tokens
	}
	return r, nil
}

// API returns the HTTP API handler (for the API Lambda and the local AWS
// mode), assembled at the first call. The stream and clock functions never
// call it, so their bootstraps do not link the HTTP API (its handlers, the
// OpenAPI document, the MCP tools), which keeps them within their size
// budget (functions/lambdatest).
func (r *Runtime) API() *httpapi.Handler {
	r.handlerOnce.Do(func() {
		h := httpapi.New(r.Watcher, r.Eval, r.authn, r.Log)
		// A Lambda response is built whole and bounded; say so with a 413
		// rather than fail past the bound.
		h.MaxBundleBytes = httpapi.LambdaBundleBytes
		h.Credentials = r.Credentials
		if r.Notify == nil {
			r.Notify = newNotify(r, r.sealer)
		}
		h.Notify = r.Notify
		h.Metrics = r.Config.Metrics
		h.MCPAllowedOrigins = r.Config.MCPAllowedOrigins
		r.Handler = h
	})
	return r.Handler
}

// startWorkers adds what the stream and clock functions (and the local AWS
// mode) run besides the API: the Streams, Scheduler and SQS clients, the
// outbox with its A2A sender, the Scheduler clock and the change-feed
// processor.
func (r *Runtime) startWorkers() {
	cfg, ac := r.Config, r.AWS
	r.Streams = dynamodbstreams.NewFromConfig(ac)
	r.Scheduler = awsscheduler.NewFromConfig(ac)
	r.SQS = awsclient.NewSQSSender(ac)
	client := cfg.AgentHTTPClient
	if client == nil {
		client = netguard.NewHTTPClient(netguard.Guard{AllowPrivate: cfg.AllowPrivateAgents}, 15*time.Second)
	}
	sender := a2aout.NewSender(a2aout.Options{HTTPClient: client, Credentials: r.Credentials})
	// The same client asks watched tasks' agents about them (the clock's
	// ticks of expectations with watchTask).
	r.Watcher.SetTaskReader(sender)
	// And subscribes to them, when agents know where to push (PUBLIC_URL).
	if cfg.PublicURL != "" {
		r.Watcher.SetWatchPush(strings.TrimSuffix(cfg.PublicURL, "/"), sender)
	}
	r.Outbox = outbox.New(r.Watcher, sender,
		outbox.Options{MaxAttempts: cfg.DeliveryAttempts, RetryFor: cfg.DeliveryRetryFor, MaxBackoff: cfg.DeliveryMaxWait, SendToTimekeepers: cfg.SendToTimekeepers, AttemptTimeout: cfg.DeliveryTimeout,
			Metrics: cfg.Metrics, ClaimSends: true, /* function instances apart may attempt one lapse at once */
			Silenced: func(ctx context.Context, rec *expect.Record) (string, error) {
				return r.Notify.SilencedLapseTask(ctx, rec)
			}}, cfg.Log)
	r.Clock = scheduler.New(r.Scheduler, scheduler.Config{
		Group: cfg.ScheduleGroup, TargetArn: cfg.ClockFunctionARN, RoleArn: cfg.SchedulerRoleARN,
		DeadLetterArn: cfg.SchedulerDLQARN, Now: cfg.Now, Immediate: func(ctx context.Context, in expect.Instant) error { return r.HandleClock(ctx, in) },
		SQS: r.SQS, QueueURL: cfg.TimerQueueURL, Precision: cfg.SchedulerPrecision, DirectWindow: cfg.DirectWindow,
	})
	if g := r.grader(); g != nil {
		r.Eval.SetGrader(g)
	}
	r.inline = &inlineOutbox{}
	if r.Notify == nil {
		r.Notify = newNotify(r, r.sealer)
	}
	r.Notify.SetEnqueuer(notifyQueue{r})
	r.Feed = &feed.Processor{Scheduler: r.Clock, Outbox: r.inline, Watcher: r.Watcher, Tasks: r.Watcher, Watches: r.Watcher, Current: r.Watcher.Get, Handlers: map[string]feed.Handler{evaluation.TypeExecution: r.Eval},
		Alerts: r.Notify, Metrics: cfg.Metrics, Markers: r.Store}
}

func (r *Runtime) authenticator(ctx context.Context) (*auth.Authenticator, error) {
	raw := r.Config.TokensJSON
	if r.Config.TokensParameter != "" {
		v, err := r.parameter(ctx, r.Config.TokensParameter)
		if err != nil {
			return nil, fmt.Errorf("TOKENS_PARAMETER: %w", err)
		}
		raw = v
	}
	if raw == "" {
		// No tokens: every request is refused with 401.
		return auth.New(nil)
	}
	return auth.Parse([]byte(raw))
}

// parameter reads one SSM SecureString.
func (r *Runtime) parameter(ctx context.Context, name string) (string, error) {
	return awsclient.Parameter(ctx, r.AWS, name)
}

// Traces returns the handler of the ingest function: POST /v1/traces
// alone (httpapi.NewTraces), trusting the authorizer as the API does.
func (r *Runtime) Traces() *httpapi.Handler {
	h := httpapi.NewTraces(r.Eval, r.authn, r.Log)
	h.Metrics = r.Config.Metrics
	return h
}

// HTTP returns the API handler (for the API Lambda and the local AWS mode).
func (r *Runtime) HTTP() http.Handler { return r.API() }

// MustStart is what every Lambda main does before lambda.Start: read the
// configuration from the environment and assemble the runtime, logging JSON
// to stderr. A configuration or start error is logged and exits the
// process, so the failure shows as an init error of the function.
// judges builds the model judge (awsjudge.New in the grader function; nil
// in the others, which never call it).
func MustStart(judges JudgeFactory) *Runtime {
	return mustStart(func(ctx context.Context, cfg Config) (*Runtime, error) {
		cfg.Judges = judges
		return New(ctx, cfg)
	})
}

// NewGrader assembles what the grader function runs: the store, the
// evaluation service with its judge, and the grading queue to put a job
// back on. It starts no clock, outbox, feed or alerting (the grader never
// schedules, delivers or notifies), which keeps its bootstrap, which also
// links the Bedrock client, within its size budget. Errors are New's.
func NewGrader(ctx context.Context, cfg Config) (*Runtime, error) {
	r, err := newCore(ctx, cfg, newJudge)
	if err != nil {
		return nil, err
	}
	r.SQS = awsclient.NewSQSSender(r.AWS)
	if g := r.grader(); g != nil {
		r.Eval.SetGrader(g)
	}
	return r, nil
}

// MustStartGrader is MustStart for the grader function: the runtime of
// NewGrader, with judges building the model judge (awsjudge.New).
func MustStartGrader(judges JudgeFactory) *Runtime {
	return mustStart(func(ctx context.Context, cfg Config) (*Runtime, error) {
		cfg.Judges = judges
		return NewGrader(ctx, cfg)
	})
}

// MustStartAPI is MustStart for the API function: the runtime of NewAPI.
func MustStartAPI() *Runtime { return mustStart(NewAPI) }

func mustStart(assemble func(context.Context, Config) (*Runtime, error)) *Runtime {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := FromEnv()
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(1)
	}
	cfg.Log = log
	rec := emf.New(cfg.MetricsNamespace)
	cfg.Metrics = rec
	rt, err := assemble(context.Background(), cfg)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	rt.EMF = rec
	return rt
}
