package awsrt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/evaluation"
)

// The grading queue carries model grading out of the stream: VERIFY (in
// the stream function) stores the VERIFY with its HEURISTIC criteria
// pending and puts one job per criterion on the queue; the grader function
// consumes it (HandleGrading), calling the judge once per job. A job whose
// judge call fails is put back with the delay its attempt count implies
// (evaluation.JudgeRetry; SQS holds a message back at most 15 minutes, so
// a longer wait comes round again early and is put back for the rest); one
// whose handling fails is retried by SQS, then dead-lettered (and alarmed
// on), and the sweep's repair finds it in the grading index anyway.

// GradingVisibilityS is the grading queue's visibility timeout: six times
// the grader function's timeout, as Lambda's guide asks of a queue its
// function consumes.
const GradingVisibilityS = 6 * GraderTimeoutS

// GraderTimeoutS is the grader function's timeout: a judge call's bound
// (evaluation.JudgeRetry.CallTimeout, 60 s) and the store's reads and
// write around it, with room to spare.
const GraderTimeoutS = 120

// GradingMaxReceives is the grading queue's maxReceiveCount.
const GradingMaxReceives = 5

// DefaultGradingRepairAfter is how late a grading job must be before the
// sweep enqueues it again (its message lost or dead-lettered).
const DefaultGradingRepairAfter = 15 * time.Minute

// maxSQSDelay is SQS's longest message timer.
const maxSQSDelay = 15 * time.Minute

// queueGrader is evaluation.Grader on the grading queue.
type queueGrader struct {
	sqs *awsclient.SQSSender
	url string
	now func() time.Time
}

func (g queueGrader) Enqueue(ctx context.Context, jobs []evaluation.GradeJob) error {
	for _, j := range jobs {
		body, err := evaluation.MarshalGradeJob(j)
		if err != nil {
			return err
		}
		if err := g.sqs.SendMessage(ctx, g.url, body, delaySeconds(j.At.Sub(g.now()))); err != nil {
			return fmt.Errorf("grading queue: %w", err)
		}
	}
	return nil
}

// queueEvaluator is evaluation.Evaluator on the grading queue: each
// message is one step of an evaluation (evaluation.RunEvaluation), which
// the grader function runs and follows with the next step's message.
type queueEvaluator struct {
	sqs *awsclient.SQSSender
	url string
}

func (e queueEvaluator) EnqueueEvaluation(ctx context.Context, id string) error {
	body, err := json.Marshal(evaluation.EvaluationMessage{EvaluationID: id})
	if err != nil {
		return err
	}
	if err := e.sqs.SendMessage(ctx, e.url, string(body), 0); err != nil {
		return fmt.Errorf("grading queue: %w", err)
	}
	return nil
}

// evaluator returns the grading queue's evaluation sender, or nil.
func (r *Runtime) evaluator() evaluation.Evaluator {
	if r.Config.GradingQueueURL == "" || r.SQS == nil {
		return nil
	}
	return queueEvaluator{sqs: r.SQS, url: r.Config.GradingQueueURL}
}

// DefaultEvaluationRepairAfter is how long a running evaluation may make
// no progress before the sweep enqueues its step again (its message lost,
// or its step's holder gone: a claim on a step expires within about two
// minutes).
const DefaultEvaluationRepairAfter = 5 * time.Minute

// DefaultReviewRepairAfter is how long a review item may wait on the
// watcher (its due time raised, or satisfied) before the sweep does it.
const DefaultReviewRepairAfter = 2 * time.Minute

// maxReviewRepairs bounds the review items one sweep mends (each is a
// watcher commit or two).
const maxReviewRepairs = 100

// delaySeconds is a message timer for d: rounded up, within SQS's bounds.
func delaySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	d = min(d, maxSQSDelay)
	return int32((d + time.Second - 1) / time.Second)
}

// HandleGrading is the grader function's handler: each message of the
// grading queue is one job (evaluation.GradeCriterion), the records of a
// batch run concurrently. A job the judge failed comes back later as a new
// message (the attempt is recorded on the VERIFY); a job whose handling
// failed (the store, the queue) is reported in batchItemFailures so that
// SQS retries it. A body that is not a job is logged and dropped: it can
// never succeed.
func (r *Runtime) HandleGrading(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	grader := r.grader()
	return concurrentBatch(ev, func(m events.SQSMessage) func() error {
		if id, ok := evaluation.ParseEvaluationMessage(m.Body); ok {
			return func() error {
				err := r.evaluationStep(ctx, id)
				if err != nil {
					r.Log.Error("evaluation step failed", "messageId", m.MessageId, "evaluation", id, "err", err)
				}
				return err
			}
		}
		job, err := evaluation.UnmarshalGradeJob(m.Body)
		if err != nil {
			r.Log.Error("grading message is not a job", "messageId", m.MessageId, "err", err)
			return nil
		}
		return func() error {
			err := r.gradeOne(ctx, grader, job)
			if err != nil {
				r.Log.Error("grading job failed", "messageId", m.MessageId, "verification", job.VerificationID, "criterion", job.CriterionID, "err", err)
			}
			return err
		}
	}), nil
}

// evaluationStep runs one step of an evaluation and puts the next step's
// message on the queue when plans remain.
func (r *Runtime) evaluationStep(ctx context.Context, id string) error {
	more, err := r.Eval.RunEvaluation(ctx, id)
	if err != nil || !more {
		return err
	}
	e := r.evaluator()
	if e == nil {
		return fmt.Errorf("no grading queue (GRADING_QUEUE_URL) to put the evaluation's next step on")
	}
	return e.EnqueueEvaluation(ctx, id)
}

func (r *Runtime) gradeOne(ctx context.Context, g evaluation.Grader, job evaluation.GradeJob) error {
	at, err := r.Eval.GradeCriterion(ctx, job)
	if err != nil || at.IsZero() {
		return err
	}
	if g == nil {
		return fmt.Errorf("no grading queue (GRADING_QUEUE_URL) to put the next attempt on")
	}
	job.At = at
	return g.Enqueue(ctx, []evaluation.GradeJob{job})
}

// grader returns the grading queue's sender, or nil without one.
func (r *Runtime) grader() evaluation.Grader {
	if r.Config.GradingQueueURL == "" || r.SQS == nil {
		return nil
	}
	return queueGrader{sqs: r.SQS, url: r.Config.GradingQueueURL, now: r.Watcher.Now}
}

// GradingQueue names the grading queue and its dead-letter queue.
type GradingQueue = TimerQueue

// CreateGradingQueue creates the grading queue and its dead-letter queue
// (name and name-dlq) unless they exist, as CreateTimerQueue does for the
// timer queue. Deployments create them with the stack.
func CreateGradingQueue(ctx context.Context, client *awsclient.SQSSender, name string) (GradingQueue, error) {
	var q GradingQueue
	var err error
	if q.DLQURL, q.DLQARN, err = awsclient.CreateSQSQueue(ctx, client, name+"-dlq", map[string]string{"MessageRetentionPeriod": "1209600", "SqsManagedSseEnabled": "true"}); err != nil {
		return q, err
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": q.DLQARN, "maxReceiveCount": GradingMaxReceives})
	q.URL, q.ARN, err = awsclient.CreateSQSQueue(ctx, client, name, map[string]string{"RedrivePolicy": string(redrive),
		"VisibilityTimeout": fmt.Sprint(GradingVisibilityS), "SqsManagedSseEnabled": "true"})
	return q, err
}
