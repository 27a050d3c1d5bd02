package judge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// Converser is the one call of the Bedrock Runtime client a Bedrock judge
// makes (*bedrockruntime.Client).
type Converser interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

// Bedrock grades with Amazon Bedrock's Converse API.
//
// Structure comes from the prompt, not from forced tool use: Converse's
// toolChoice "tool" is honoured only by some model families (Anthropic
// Claude 3 and later, Amazon Nova), while a JSON answer parsed strictly
// (parseAnswer) works with every chat model Converse serves. Temperature is
// 0. Throttling (ThrottlingException, and 5xx such as
// ServiceUnavailableException) is retried by the SDK's standard retryer,
// bounded by NewBedrockClient's attempts; every other error
// (ValidationException, AccessDeniedException, ResourceNotFoundException,
// a model error or timeout), a stopReason other than end_turn or
// stop_sequence (max_tokens, guardrail_intervened, content_filtered, ...),
// a timeout and an answer that is not a score leave the criterion PENDING
// with the reason.
type Bedrock struct {
	Client Converser
	// ModelID is the Converse modelId: a model id, an inference profile id
	// or an ARN.
	ModelID string
	// Timeout bounds one criterion's grading, retries included (default
	// DefaultTimeout).
	Timeout time.Duration
}

// BedrockMaxAttempts bounds the SDK's attempts of one Converse call
// (throttling and 5xx are retried with its jittered backoff).
const BedrockMaxAttempts = 3

// bedrockMaxTokens bounds the answer's length.
const bedrockMaxTokens = 1024

// NewBedrockClient returns a Bedrock Runtime client from ac whose retries
// are bounded by BedrockMaxAttempts with a backoff of at most 5 s. A
// non-empty endpoint overrides the service endpoint (a test's fake);
// otherwise the regional endpoint is used even when ac points every other
// client at an emulator. retryOpts adjust the retryer further (tests
// shorten the backoff).
func NewBedrockClient(ac aws.Config, endpoint string, retryOpts ...func(*retry.StandardOptions)) *bedrockruntime.Client {
	return bedrockruntime.NewFromConfig(ac, func(o *bedrockruntime.Options) {
		o.BaseEndpoint = nil
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.Retryer = retry.NewStandard(append([]func(*retry.StandardOptions){func(so *retry.StandardOptions) {
			so.MaxAttempts = BedrockMaxAttempts
			so.MaxBackoff = 5 * time.Second
		}}, retryOpts...)...)
	})
}

// GradedBy is the graded_by of this judge's grades: "model:bedrock:" and
// the model id.
func (b *Bedrock) GradedBy() string { return "model:bedrock:" + b.ModelID }

// converseDoc is the Converse request as its REST body documents it, plus
// modelId (which travels in the path): what prompt_digest covers.
type converseDoc struct {
	ModelID         string            `json:"modelId"`
	System          []textBlock       `json:"system"`
	Messages        []converseMessage `json:"messages"`
	InferenceConfig inferenceDoc      `json:"inferenceConfig"`
}

type textBlock struct {
	Text string `json:"text"`
}

type converseMessage struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type inferenceDoc struct {
	MaxTokens   int32   `json:"maxTokens"`
	Temperature float32 `json:"temperature"`
}

func (b *Bedrock) request(req anticipate.JudgeRequest) (converseDoc, *bedrockruntime.ConverseInput, error) {
	user, err := userPrompt(req)
	if err != nil {
		return converseDoc{}, nil, err
	}
	doc := converseDoc{
		ModelID:         b.ModelID,
		System:          []textBlock{{Text: systemPrompt}},
		Messages:        []converseMessage{{Role: "user", Content: []textBlock{{Text: user}}}},
		InferenceConfig: inferenceDoc{MaxTokens: bedrockMaxTokens, Temperature: 0},
	}
	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String(doc.ModelID),
		System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: systemPrompt}},
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: user}}}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(doc.InferenceConfig.MaxTokens), Temperature: aws.Float32(0)},
	}
	return doc, in, nil
}

// Judge grades one criterion (see Bedrock).
func (b *Bedrock) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	doc, in, err := b.request(req)
	if err != nil {
		return nil, err
	}
	out, err := b.Client.Converse(ctx, in)
	if err != nil {
		return nil, bedrockError(ctx, err)
	}
	switch out.StopReason {
	case types.StopReasonEndTurn, types.StopReasonStopSequence:
	case types.StopReasonMaxTokens:
		return nil, fmt.Errorf("%w: the answer was cut at the token limit (stopReason max_tokens)", errNotAScore)
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return nil, fmt.Errorf("%w: the answer was withheld (stopReason %s)", anticipate.ErrNotAGrade, out.StopReason)
	default:
		return nil, fmt.Errorf("%w: stopReason %q", errNotAScore, out.StopReason)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, fmt.Errorf("%w: the output is not a message", errNotAScore)
	}
	var text string
	for _, c := range msg.Value.Content {
		switch t := c.(type) {
		case *types.ContentBlockMemberText:
			text += t.Value
		case *types.ContentBlockMemberReasoningContent:
			// A reasoning model's thinking is not the answer.
		default:
			return nil, fmt.Errorf("%w: the message holds a %T block", errNotAScore, c)
		}
	}
	resp, err := parseAnswer(text)
	if err != nil {
		return nil, err
	}
	if resp.PromptDigest, err = Digest(doc); err != nil {
		return nil, err
	}
	resp.GradedBy = b.GradedBy()
	return resp, nil
}

// bedrockError says why a Converse call failed: the service's error code
// and message, or the timeout.
func bedrockError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("judge timed out: %w", ctx.Err())
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		var mr *retry.MaxAttemptsError
		if errors.As(err, &mr) {
			return fmt.Errorf("Bedrock answered %s after %d attempts: %s", ae.ErrorCode(), mr.Attempt, clip(ae.ErrorMessage()))
		}
		return fmt.Errorf("Bedrock answered %s: %s", ae.ErrorCode(), clip(ae.ErrorMessage()))
	}
	return fmt.Errorf("Bedrock unreachable: %w", err)
}
