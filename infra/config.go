package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	retain "github.com/agentclock/clockwork/internal/retention"
)

// Stages the stack can be deployed as. Anything else fails synth.
var Stages = []string{"dev", "staging", "prod"}

// Config is everything that varies between deployments. DefaultConfig gives
// the values of each stage; context keys (cdk.json or -c key=value) override
// some of them, see ConfigFromContext.
type Config struct {
	// Stage is dev, staging or prod. dev is disposable: its table is deleted
	// with the stack and has no deletion protection. staging and prod retain
	// the table (and its logs) and protect it from deletion.
	Stage string
	// Name prefixes every physical name: the stack, the table, the functions,
	// the schedule group ("clockwork-<stage>").
	Name string
	// Arch is the Lambda architecture: "arm64" (default) or "x86_64" (for
	// emulators on x86 hosts without arm64 emulation).
	Arch string
	// TokensParameter is the SSM SecureString parameter holding the tokens
	// JSON ({"tokens":[{"tokenSha256",...}]}). It is created by the operator,
	// not by the stack (CloudFormation cannot create SecureStrings).
	TokensParameter string
	// LogRetentionDays applies to the functions' and the API's log groups.
	LogRetentionDays int
	// ThrottleRate and ThrottleBurst are the HTTP API stage's default route
	// throttling (requests per second, burst).
	ThrottleRate, ThrottleBurst int
	// ClockConcurrency is the clock function's reserved concurrency: it caps
	// how many instants are processed at once when many fall due together,
	// which protects the table and the rest of the account's concurrency.
	// 0 leaves the function unreserved (accounts with a concurrency quota of
	// 10, new accounts, cannot reserve any).
	ClockConcurrency int
	// APIConcurrency, AuthorizerConcurrency and StreamConcurrency are the
	// reserved concurrency of those functions (0: unreserved). The api's
	// and authorizer's cap what a flood of requests can take from the
	// account; the stream function's keeps its consumer alive (it is
	// guaranteed, whatever the other functions take), so schedules and
	// lapse deliveries go on while the API is flooded.
	APIConcurrency, AuthorizerConcurrency, StreamConcurrency int
	// GraderConcurrency is the grader function's reserved concurrency and
	// its grading-queue mapping's maximum concurrency (the mapping is its
	// only trigger, so the two are equal; at least 2, the least a mapping
	// takes): how many judge calls run at once.
	GraderConcurrency int
	// IngestConcurrency is the ingest function's reserved concurrency (OTLP
	// exports: POST /v1/traces).
	IngestConcurrency int
	// PublicThrottleRate and PublicThrottleBurst throttle each route that
	// needs no token (/healthz, /openapi.json), below the stage default.
	PublicThrottleRate, PublicThrottleBurst int
	// SigningKeyParameter is the SSM SecureString holding the hex Ed25519
	// seed that signs VERIFY messages (SIGNING_KEY_PARAMETER; created by the
	// operator, like the tokens). Empty: VERIFYs are not server-signed.
	SigningKeyParameter string
	// MCPAllowedOrigins are the browser origins (comma-separated
	// "https://host[:port]") that may call /mcp (MCP_ALLOWED_ORIGINS on the
	// API function). Empty: none; clients that send no Origin are served.
	MCPAllowedOrigins string
	// AlarmEmail is subscribed to the alarm topic. Required outside dev
	// (Check): alarms nobody hears protect nothing.
	AlarmEmail string
	// AllowPrivateAgents lets lapse tasks reach agents on loopback and
	// private addresses (ALLOW_PRIVATE_AGENTS). Off by default; only a dev
	// stage may turn it on (for agents beside an emulator).
	AllowPrivateAgents bool
	// JudgeKind chooses the model judge of HEURISTIC criteria, run by the
	// stream function (VERIFY): "" (none: they stay PENDING for a grade),
	// "bedrock" (Amazon Bedrock Converse with JudgeModel, a model id or
	// ARN; the stream function alone is granted bedrock:InvokeModel on that
	// model) or "openai" (an OpenAI-compatible endpoint at JudgeURL with
	// JudgeModel; its API key in the SSM SecureString JudgeAPIKeyParameter,
	// which the stream function alone may read).
	JudgeKind, JudgeModel, JudgeURL, JudgeAPIKeyParameter string
	// SESFrom is the verified SES identity (an address) e-mail alert
	// channels are sent from (SES_FROM); the functions that send
	// notifications (api for a channel test, clock) are granted
	// ses:SendEmail on it and on its domain. Empty: e-mail channels are
	// refused.
	SESFrom string
	// AlertEventBuses are the EventBridge buses (names, comma-separated)
	// eventbridge alert channels may name; the notifying functions are
	// granted events:PutEvents on them (EVENTBRIDGE_ALERTS). Empty: none.
	AlertEventBuses string
	// ScoresChannel (SCORES_CHANNEL; context scoresChannel) names an
	// operator's channel, typically an otlp one, that every agent's
	// verification.completed goes to.
	ScoresChannel string
	// PublicURL is the API's public base URL (PUBLIC_URL), for console
	// links in notifications.
	PublicURL string
	// RetainExpectations and RetainEvidence are the retention of final
	// expectation records and of completed plans' evidence
	// (RETAIN_EXPECTATIONS, RETAIN_EVIDENCE; package retention: Go or ISO
	// 8601 durations, "0" forever), which DynamoDB's TTL on the table's
	// expiresAt attribute carries out.
	RetainExpectations, RetainEvidence string
	// FactLookbackMax bounds satisfiedBy.lookback (FACT_LOOKBACK_MAX;
	// context factLookbackMax, a Go or ISO 8601 duration, "0" off).
	FactLookbackMax string
	// DeliveryRetryFor is how long lapse tasks and notifications are
	// retried from their first failure (DELIVERY_RETRY_FOR, a Go duration;
	// default 24h).
	DeliveryRetryFor string
}

// Retain reports whether the table, queues and logs outlive the stack.
func (c Config) Retain() bool { return c.Stage != "dev" }

// TerminationProtection reports whether CloudFormation refuses to delete
// the stack (prod).
func (c Config) TerminationProtection() bool { return c.Stage == "prod" }

// Check refuses a configuration that must not be deployed, saying what to
// pass: outside dev, an alarm subscription.
func (c Config) Check() error {
	if c.Stage != "dev" && c.AlarmEmail == "" {
		return fmt.Errorf("context alarmEmail: stage %s needs someone to hear its alarms: pass -c alarmEmail=oncall@example.com "+
			"(the address must confirm the subscription e-mail AWS sends); only dev may deploy without", c.Stage)
	}
	if c.GraderConcurrency < 2 {
		// The grading queue's mapping takes at least 2, and must not
		// exceed the grader's reservation.
		return fmt.Errorf("grader concurrency %d: at least 2 (the least an SQS mapping's maximum concurrency takes)", c.GraderConcurrency)
	}
	return nil
}

// PlannedStreamShards is about how many DynamoDB stream shards the prod
// load that docs/operations.md plans for makes (an approximation: shards
// follow the table's partitions, 80 or more at 80,000 WRU/s, and split and
// roll over, so there can be more for a time). Each shard holds
// StreamParallelization stream invocations at a time, so prod's stream
// reservation must cover both, or shards beyond it are throttled and
// their records age out.
const PlannedStreamShards = 80

// TimerQueueMaxConcurrency is the maximum concurrency of the clock's SQS
// event source mapping (its ScalingConfig): below the clock's reservation,
// which Scheduler's invocations and the sweep share and which the mapping
// "doesn't account for" (AWS), so that the mapping's batches are not
// throttled back to the queue (visibility timeout, then the DLQ) while
// Scheduler fires. Three fifths of the reservation, and at least 2 (the
// least AWS accepts); 0 (not set) for an unreserved clock.
func TimerQueueMaxConcurrency(clockReserved int) int {
	if clockReserved <= 0 {
		return 0
	}
	return max(2, clockReserved*3/5)
}

// DefaultConfig returns the settings of stage, or an error that says which
// stages exist.
func DefaultConfig(stage string) (Config, error) {
	c := Config{
		Stage: stage, Name: "clockwork-" + stage, Arch: "arm64",
		TokensParameter:    "/clockwork/" + stage + "/tokens",
		RetainExpectations: retain.DefaultExpectations, RetainEvidence: retain.DefaultEvidence,
		DeliveryRetryFor: "24h", FactLookbackMax: "PT24H",
	}
	switch stage {
	case "dev":
		c.LogRetentionDays, c.ThrottleRate, c.ThrottleBurst, c.ClockConcurrency = 7, 50, 100, 5
		c.APIConcurrency, c.AuthorizerConcurrency, c.StreamConcurrency = 10, 5, 2
		c.GraderConcurrency, c.IngestConcurrency = 2, 5
	case "staging":
		c.LogRetentionDays, c.ThrottleRate, c.ThrottleBurst, c.ClockConcurrency = 30, 100, 200, 20
		c.APIConcurrency, c.AuthorizerConcurrency, c.StreamConcurrency = 50, 20, 20
		c.GraderConcurrency, c.IngestConcurrency = 4, 10
	case "prod":
		c.LogRetentionDays, c.ThrottleRate, c.ThrottleBurst, c.ClockConcurrency = 90, 1000, 2000, 100
		// The stream function: StreamParallelization invocations per
		// stream shard, and the plan for prod's load is
		// PlannedStreamShards (docs/operations.md).
		c.APIConcurrency, c.AuthorizerConcurrency, c.StreamConcurrency = 400, 100, 170
		c.GraderConcurrency, c.IngestConcurrency = 10, 50
	default:
		return Config{}, fmt.Errorf("unknown stage %q: the stage must be one of %s; pass it as -c stage=dev, -c stage=staging or -c stage=prod (cdk.json defaults to dev)",
			stage, strings.Join(Stages, ", "))
	}
	c.PublicThrottleRate, c.PublicThrottleBurst = 10, 20
	return c, nil
}

// ContextKeys are the context keys ConfigFromContext reads.
var ContextKeys = []string{"stage", "arch", "tokensParameter", "clockConcurrency", "throttleRate", "throttleBurst", "alarmEmail", "allowPrivateAgents",
	"judgeKind", "judgeModel", "judgeUrl", "judgeApiKeyParameter", "apiConcurrency", "authorizerConcurrency", "streamConcurrency", "signingKeyParameter", "mcpAllowedOrigins",
	"sesFrom", "alertEventBuses", "publicUrl", "scoresChannel", "retainExpectations", "retainEvidence", "factLookbackMax", "deliveryRetryFor", "graderConcurrency", "ingestConcurrency"}

// ConfigFromContext builds the configuration from CDK context values (get
// returns the value of a key and whether it is set). Context values may be
// strings (from -c) or JSON values (from cdk.json). Every error names the key
// and the accepted values.
func ConfigFromContext(get func(key string) (any, bool)) (Config, error) {
	str := func(key string) (string, bool, error) {
		v, ok := get(key)
		if !ok || v == nil {
			return "", false, nil
		}
		switch x := v.(type) {
		case string:
			return strings.TrimSpace(x), true, nil
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), true, nil
		case bool:
			return strconv.FormatBool(x), true, nil
		default:
			return "", true, fmt.Errorf("context %s: %v is not a string or number", key, v)
		}
	}
	stage, ok, err := str("stage")
	if err != nil {
		return Config{}, err
	}
	if !ok || stage == "" {
		stage = "dev"
	}
	c, err := DefaultConfig(stage)
	if err != nil {
		return c, err
	}
	for _, r := range []struct {
		key string
		dst *string
	}{{"retainExpectations", &c.RetainExpectations}, {"retainEvidence", &c.RetainEvidence}, {"factLookbackMax", &c.FactLookbackMax}} {
		if v, ok, err := str(r.key); err != nil {
			return c, err
		} else if ok && v != "" {
			if _, err := retain.Parse(v); err != nil {
				return c, fmt.Errorf("context %s: %w; e.g. -c %s=P90D, or 0 to keep forever", r.key, err, r.key)
			}
			*r.dst = v
		}
	}
	if v, ok, err := str("arch"); err != nil {
		return c, err
	} else if ok {
		switch v {
		case "arm64", "x86_64":
			c.Arch = v
		default:
			return c, fmt.Errorf("context arch: %q is not a Lambda architecture; use -c arch=arm64 (default) or -c arch=x86_64", v)
		}
	}
	if v, ok, err := str("deliveryRetryFor"); err != nil {
		return c, err
	} else if ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 14*24*time.Hour {
			return c, fmt.Errorf("context deliveryRetryFor: %q is not a duration from 1m to 336h (the timer queue keeps a message 14 days); e.g. -c deliveryRetryFor=72h", v)
		}
		c.DeliveryRetryFor = v
	}
	if v, ok, err := str("tokensParameter"); err != nil {
		return c, err
	} else if ok {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " *?") {
			return c, fmt.Errorf("context tokensParameter: %q is not an SSM parameter path; use a name such as /clockwork/%s/tokens", v, c.Stage)
		}
		c.TokensParameter = v
	}
	if v, ok, err := str("signingKeyParameter"); err != nil {
		return c, err
	} else if ok && v != "" {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " *?") {
			return c, fmt.Errorf("context signingKeyParameter: %q is not an SSM parameter path; use a name such as /clockwork/%s/verify-key", v, c.Stage)
		}
		c.SigningKeyParameter = v
	}
	if v, ok, err := str("mcpAllowedOrigins"); err != nil {
		return c, err
	} else if ok && v != "" {
		var origins []string
		for _, o := range strings.Split(v, ",") {
			o = strings.TrimSpace(o)
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
				return c, fmt.Errorf("context mcpAllowedOrigins: %q is not an origin; list origins as scheme://host[:port], comma-separated, e.g. -c mcpAllowedOrigins=https://console.example.com", o)
			}
			origins = append(origins, o)
		}
		c.MCPAllowedOrigins = strings.Join(origins, ",")
	}
	ints := []struct {
		key string
		dst *int
		min int
	}{{"clockConcurrency", &c.ClockConcurrency, 0}, {"throttleRate", &c.ThrottleRate, 1}, {"throttleBurst", &c.ThrottleBurst, 1},
		{"apiConcurrency", &c.APIConcurrency, 0}, {"authorizerConcurrency", &c.AuthorizerConcurrency, 0}, {"streamConcurrency", &c.StreamConcurrency, 0},
		{"graderConcurrency", &c.GraderConcurrency, 2}, {"ingestConcurrency", &c.IngestConcurrency, 0}}
	for _, it := range ints {
		v, ok, err := str(it.key)
		if err != nil {
			return c, err
		}
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < it.min {
			return c, fmt.Errorf("context %s: %q is not an integer >= %d; pass e.g. -c %s=%d", it.key, v, it.min, it.key, *it.dst)
		}
		*it.dst = n
	}
	if v, ok, err := str("alarmEmail"); err != nil {
		return c, err
	} else if ok && v != "" {
		if !strings.Contains(v, "@") {
			return c, fmt.Errorf("context alarmEmail: %q is not an e-mail address", v)
		}
		c.AlarmEmail = v
	}
	if v, ok, err := str("allowPrivateAgents"); err != nil {
		return c, err
	} else if ok && v != "" {
		allow, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("context allowPrivateAgents: %q is not true or false", v)
		}
		if allow && c.Stage != "dev" {
			return c, fmt.Errorf("context allowPrivateAgents: only a dev stage may send lapse tasks to private addresses (stage is %s); drop -c allowPrivateAgents=true", c.Stage)
		}
		c.AllowPrivateAgents = allow
	}
	for _, it := range []struct {
		key string
		dst *string
	}{{"judgeKind", &c.JudgeKind}, {"judgeModel", &c.JudgeModel}, {"judgeUrl", &c.JudgeURL}, {"judgeApiKeyParameter", &c.JudgeAPIKeyParameter}} {
		v, _, err := str(it.key)
		if err != nil {
			return c, err
		}
		*it.dst = v
	}
	if err := c.checkJudge(); err != nil {
		return c, err
	}
	if err := c.readAlerts(str); err != nil {
		return c, err
	}
	return c, c.Check()
}

// plainAddress is an e-mail address without a display name (net/mail
// would link package net, and with it cgo, into the CDK app).
var plainAddress = regexp.MustCompile(`^[A-Za-z0-9.!#$%&'*+/=?^_{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`)

var eventBusName = regexp.MustCompile(`^[/\.\-_A-Za-z0-9]{1,256}$`)

// readAlerts reads the alert settings: sesFrom, alertEventBuses, publicUrl.
func (c *Config) readAlerts(str func(string) (string, bool, error)) error {
	from, _, err := str("sesFrom")
	if err != nil {
		return err
	}
	if from != "" {
		if !plainAddress.MatchString(from) {
			return fmt.Errorf("context sesFrom: %q is not a plain e-mail address; pass the verified SES identity, e.g. -c sesFrom=clockwork@example.com", from)
		}
	}
	c.SESFrom = from
	buses, _, err := str("alertEventBuses")
	if err != nil {
		return err
	}
	var names []string
	for _, b := range strings.Split(buses, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if !eventBusName.MatchString(b) {
			return fmt.Errorf("context alertEventBuses: %q is not an event bus name; list names, comma-separated, e.g. -c alertEventBuses=default,ops", b)
		}
		names = append(names, b)
	}
	c.AlertEventBuses = strings.Join(names, ",")
	public, _, err := str("publicUrl")
	if err != nil {
		return err
	}
	if public != "" {
		if u, err := url.Parse(public); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("context publicUrl: %q is not an https URL, e.g. -c publicUrl=https://clockwork.example.com", public)
		}
	}
	c.PublicURL = public
	scores, _, err := str("scoresChannel")
	if err != nil {
		return err
	}
	if scores != "" && !channelID.MatchString(scores) {
		return fmt.Errorf("context scoresChannel: %q is not a channel id (letters, digits, '.', '_', '-'; at most 64), e.g. -c scoresChannel=otel-scores", scores)
	}
	c.ScoresChannel = scores
	return nil
}

// channelID is a channel id (alert.ValidChannelID).
var channelID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkJudge refuses a judge configuration the stream function could not
// build, naming the context key.
func (c Config) checkJudge() error {
	switch c.JudgeKind {
	case "":
		if c.JudgeModel != "" || c.JudgeURL != "" || c.JudgeAPIKeyParameter != "" {
			return fmt.Errorf("context judgeKind: judgeModel, judgeUrl or judgeApiKeyParameter is set without a judge; add -c judgeKind=bedrock or -c judgeKind=openai")
		}
	case "bedrock":
		if c.JudgeModel == "" || strings.ContainsAny(c.JudgeModel, " *?") {
			return fmt.Errorf("context judgeModel: %q is not a Bedrock model id; pass e.g. -c judgeModel=anthropic.claude-3-haiku-20240307-v1:0", c.JudgeModel)
		}
		if c.JudgeURL != "" || c.JudgeAPIKeyParameter != "" {
			return fmt.Errorf("context judgeUrl and judgeApiKeyParameter are for judgeKind=openai; a Bedrock judge uses the function's role")
		}
	case "openai":
		if !strings.HasPrefix(c.JudgeURL, "https://") || c.JudgeModel == "" {
			return fmt.Errorf("context judgeUrl and judgeModel: an openai judge needs an https base URL and a model, e.g. -c judgeUrl=https://api.openai.com/v1 -c judgeModel=gpt-4o-mini")
		}
		if c.JudgeAPIKeyParameter != "" && (!strings.HasPrefix(c.JudgeAPIKeyParameter, "/") || strings.ContainsAny(c.JudgeAPIKeyParameter, " *?")) {
			return fmt.Errorf("context judgeApiKeyParameter: %q is not an SSM parameter path; use a name such as /clockwork/%s/judge-api-key", c.JudgeAPIKeyParameter, c.Stage)
		}
	default:
		return fmt.Errorf("context judgeKind: %q is not bedrock or openai", c.JudgeKind)
	}
	return nil
}

// BedrockModelARN returns the ARN the Bedrock judge's model is granted on:
// the model id given as an ARN as is, else the foundation model's ARN in the
// stack's partition and region (partition and region are CloudFormation
// tokens when not known at synth).
func (c Config) BedrockModelARN(partition, region string) string {
	if strings.HasPrefix(c.JudgeModel, "arn:") {
		return c.JudgeModel
	}
	return "arn:" + partition + ":bedrock:" + region + "::foundation-model/" + c.JudgeModel
}
