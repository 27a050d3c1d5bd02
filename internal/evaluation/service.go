// Package evaluation is the application service of the post-hoc evaluation
// loop (AIGP RFC-032): it stores ANTICIPATE declarations, seals them
// atomically with the first TOOL_REQUEST or STEP_COMPLETE of their plan,
// keeps each execution's digest chain, and runs VERIFY from the change feed
// when PLAN_COMPLETE is stored. Every rule lives in package anticipate; this
// package loads, applies and commits through store.Update.
package evaluation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// Judge grades HEURISTIC criteria. Implementations must never return a
// grade they did not get: an error leaves the criterion pending.
type Judge interface {
	Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error)
}

// WatcherReader answers the assertion functions that read the watcher's
// records of an agent.
type WatcherReader interface {
	ExpectationState(ctx context.Context, agentID, id string) (string, bool, error)
	LapseCount(ctx context.Context, agentID, kind string) (int, error)
}

// Service is the evaluation loop's application service.
type Service struct {
	store store.Store
	now   func() time.Time
	// markEffects: Options.MarkEffects.
	markEffects bool
	judge       Judge
	// retry bounds the attempts at each criterion; grader carries the
	// grading jobs (Options).
	retry  JudgeRetry
	grader Grader
	// modelGrading: HEURISTIC criteria wait for the model judge (Options).
	modelGrading bool
	watcher      WatcherReader
	reviewClock  ReviewClock
	key          ed25519.PrivateKey
	metrics      metrics.Recorder
	// retain is -retain-evidence (Options.RetainEvidence).
	retain time.Duration

	// evaluator runs evaluations; judgeWithModel and evalJudgeCalls are
	// Options.JudgeWithModel and Options.EvaluationJudgeRate.
	evaluator      Evaluator
	judgeWithModel func(model string) (Judge, bool)
	evalJudgeCalls *rate.Limiter

	progMu   sync.Mutex
	programs map[string]*anticipate.Anticipation // by digest, compiled
}

// Options configure the service.
type Options struct {
	Now func() time.Time
	// MarkEffects makes a PLAN_COMPLETE, and a VERIFY whose verdict
	// becomes FAIL, write the marker of their effects (package effects):
	// on AWS, whose stream may discard a change's record.
	MarkEffects bool
	// Judge grades HEURISTIC criteria; nil leaves them pending.
	Judge Judge
	// JudgeRetry bounds the judge's attempts at each criterion (zero
	// fields: its defaults).
	JudgeRetry JudgeRetry
	// Grader carries the grading jobs VERIFY creates (see GradeCriterion);
	// with a Judge and no Grader, HEURISTIC criteria wait for one set with
	// SetGrader, or for a RepairGrading.
	Grader Grader
	// ModelGrading makes VERIFY leave HEURISTIC criteria waiting for the
	// model judge even though this service has none: another process
	// grades them (on AWS the grader function; the stream function, which
	// runs VERIFY, holds no judge). It is implied by Judge.
	ModelGrading bool
	// Watcher answers expectation_state and lapse_count.
	Watcher WatcherReader
	// ReviewClock keeps review items' due times (the watcher); nil keeps
	// none.
	ReviewClock ReviewClock
	// SigningKey, when set, adds an Ed25519 server_signature to VERIFY.
	SigningKey ed25519.PrivateKey
	// Metrics counts the VERIFYs created and the grades submitted, by
	// verdict (nil: none).
	Metrics metrics.Recorder
	// RetainEvidence is how long a completed plan's evidence (its
	// execution, events, VERIFYs and the ANTICIPATEs it bound) is kept
	// after PLAN_COMPLETE; zero keeps it forever.
	RetainEvidence time.Duration
	// JudgeWithModel returns the Judge grading with another model of the
	// same service (an evaluation's judge override); nil, or false, when
	// the judge takes no model.
	JudgeWithModel func(model string) (Judge, bool)
	// EvaluationJudgeRate bounds the judge calls evaluations make, per
	// second in this process (default DefaultEvaluationJudgeRate).
	EvaluationJudgeRate float64
}

// DefaultEvaluationJudgeRate is the default bound on the judge calls
// evaluations make per second and process: re-grading must not starve the
// VERIFYs' own grading, nor exhaust a model provider's rate limit.
const DefaultEvaluationJudgeRate = 10

// New returns the service.
func New(st store.Store, opt Options) *Service {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	judgeRate := opt.EvaluationJudgeRate
	if judgeRate <= 0 {
		judgeRate = DefaultEvaluationJudgeRate
	}
	return &Service{judgeWithModel: opt.JudgeWithModel, evalJudgeCalls: rate.NewLimiter(rate.Limit(judgeRate), max(1, int(judgeRate))), store: st, markEffects: opt.MarkEffects, now: func() time.Time { return now().UTC() }, judge: opt.Judge, retry: opt.JudgeRetry.withDefaults(), grader: opt.Grader, modelGrading: opt.ModelGrading || opt.Judge != nil,
		watcher: opt.Watcher, reviewClock: opt.ReviewClock, key: opt.SigningKey, metrics: metrics.Or(opt.Metrics), retain: opt.RetainEvidence, programs: map[string]*anticipate.Anticipation{}}
}

// PublicKey returns the VERIFY signing key's public half, or nil.
func (s *Service) PublicKey() ed25519.PublicKey {
	if s.key == nil {
		return nil
	}
	return s.key.Public().(ed25519.PublicKey)
}

// Authorizer tells whether the caller may act for an agent.
type Authorizer func(agentID string) bool

func forbidden(agentID string) error {
	return errs.E(errs.Forbidden, "token may not act for agent %q", agentID)
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("evaluation: %w", err)
}
