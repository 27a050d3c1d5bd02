package judge

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/netguard"
)

// The kinds of judge (Config.Kind).
const (
	KindHTTP    = "http"    // this project's judge protocol (Client)
	KindOpenAI  = "openai"  // an OpenAI-compatible Chat Completions endpoint (OpenAI)
	KindBedrock = "bedrock" // Amazon Bedrock's Converse API (Bedrock)
)

// Judge grades one HEURISTIC criterion (evaluation.Judge).
type Judge interface {
	Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error)
}

// Config chooses and configures a judge; both runtimes read it (flags
// locally, environment variables on AWS) and build it with New.
type Config struct {
	// Kind is KindHTTP, KindOpenAI or KindBedrock; "" means KindHTTP when
	// URL is set, and no judge otherwise.
	Kind string
	// URL is the judge endpoint (http), the API base URL such as
	// https://api.openai.com/v1 (openai), or an endpoint that overrides
	// Bedrock's regional one (bedrock; a test's fake).
	URL string
	// Model is the model name (openai) or model id (bedrock).
	Model string
	// Token is the bearer token of the http judge; APIKey the openai API
	// key (sent as a bearer token).
	Token, APIKey string
	// AllowPrivate lets an http or openai judge be on loopback or a private
	// address (netguard).
	AllowPrivate bool
	// Timeout bounds one criterion's grading (default DefaultTimeout).
	Timeout time.Duration
	// AWS, when set, is the SDK configuration of the bedrock judge;
	// otherwise it is loaded (awsclient.Config, with URL as the endpoint).
	AWS *aws.Config
	// Metrics, when set, counts the judge's calls and failures and times
	// them (New wraps the judge with Instrument).
	Metrics metrics.Recorder
}

// New builds the configured judge, or returns nil when none is configured.
// A kind without what it needs (a URL, a model), or an unknown kind, is an
// error naming the setting. With c.Metrics the judge is instrumented.
func New(ctx context.Context, c Config) (Judge, error) {
	j, err := build(ctx, c)
	if j == nil || err != nil || c.Metrics == nil {
		return j, err
	}
	kind := c.Kind
	if kind == "" {
		kind = KindHTTP
	}
	return Instrument(j, kind, c.Metrics), nil
}

// Instrument returns j counting each call (metrics.JudgeCalls), each call
// that returned no grade (metrics.JudgeFailures) and the time of each
// (metrics.JudgeLatency), labelled with kind.
func Instrument(j Judge, kind string, m metrics.Recorder) Judge {
	return instrumented{j: j, kind: kind, m: metrics.Or(m)}
}

type instrumented struct {
	j    Judge
	kind string
	m    metrics.Recorder
}

func (i instrumented) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	start := time.Now()
	resp, err := i.j.Judge(ctx, req)
	i.m.Record(metrics.JudgeCalls, 1, i.kind)
	i.m.Record(metrics.JudgeLatency, time.Since(start).Seconds(), i.kind)
	if err != nil {
		i.m.Record(metrics.JudgeFailures, 1, i.kind)
	}
	return resp, err
}

func build(ctx context.Context, c Config) (Judge, error) {
	kind := c.Kind
	if kind == "" {
		if c.URL == "" {
			return nil, nil
		}
		kind = KindHTTP
	}
	httpClient := func() *http.Client {
		return netguard.NewHTTPClient(netguard.Guard{AllowPrivate: c.AllowPrivate}, c.timeout())
	}
	switch kind {
	case KindHTTP:
		if c.URL == "" {
			return nil, fmt.Errorf("judge %s: a URL is required", kind)
		}
		return &Client{URL: c.URL, Token: c.Token, HTTP: httpClient(), Timeout: c.Timeout}, nil
	case KindOpenAI:
		if c.URL == "" || c.Model == "" {
			return nil, fmt.Errorf("judge %s: a base URL and a model are required", kind)
		}
		return &OpenAI{BaseURL: c.URL, Model: c.Model, APIKey: c.APIKey, HTTP: httpClient(), Timeout: c.Timeout}, nil
	case KindBedrock:
		if c.Model == "" {
			return nil, fmt.Errorf("judge %s: a model id is required", kind)
		}
		var ac aws.Config
		if c.AWS != nil {
			ac = *c.AWS
		} else {
			var err error
			if ac, err = awsclient.Config(ctx, c.URL); err != nil {
				return nil, fmt.Errorf("judge %s: aws configuration: %w", kind, err)
			}
		}
		return &Bedrock{Client: NewBedrockClient(ac, c.URL), ModelID: c.Model, Timeout: c.Timeout}, nil
	default:
		return nil, fmt.Errorf("judge kind %q is not one of %s, %s, %s", kind, KindHTTP, KindOpenAI, KindBedrock)
	}
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// ModelJudge is a judge of a model service that can grade with another of
// its models: the same endpoint and credentials, another model (an
// evaluation's judge override).
type ModelJudge interface {
	Judge
	WithModel(model string) Judge
}

// WithModel returns the judge grading with model instead, still counted
// under its kind; ok is false when the judge names no model (the protocol
// judge).
func WithModel(j Judge, model string) (Judge, bool) {
	if i, ok := j.(instrumented); ok {
		inner, ok := WithModel(i.j, model)
		if !ok {
			return nil, false
		}
		return instrumented{j: inner, kind: i.kind, m: i.m}, true
	}
	if m, ok := j.(ModelJudge); ok {
		return m.WithModel(model), true
	}
	return nil, false
}

// WithModel returns a copy of the judge that sends model.
func (c *OpenAI) WithModel(model string) Judge {
	cp := *c
	cp.Model = model
	return &cp
}

// WithModel returns a copy of the judge that asks model.
func (b *Bedrock) WithModel(model string) Judge {
	cp := *b
	cp.ModelID = model
	return &cp
}
