package judge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/judge"
	"github.com/agentclock/clockwork/internal/judge/judgetest"
)

func request() anticipate.JudgeRequest {
	return anticipate.JudgeRequest{
		VerificationID: "vrf-1", CriterionID: "hc-1", Description: "The summary is accurate",
		Assertion: "The summary names the user created",
		Evidence: anticipate.JudgeEvidence{
			Trajectory:       anticipate.TrajectorySummary{StepCount: 3, ToolsInvoked: map[string]int{"iam_create_user": 1}, DurationSeconds: 42},
			OutcomeVariables: map[string]any{"target_username": "alice"},
		},
	}
}

const model = "gpt-4o-mini-2024-07-18"

func openAI(t *testing.T, f *judgetest.OpenAI, timeout time.Duration) *judge.OpenAI {
	t.Helper()
	j, err := judge.New(context.Background(), judge.Config{Kind: judge.KindOpenAI, URL: f.BaseURL(), Model: model, APIKey: "sk-test", AllowPrivate: true, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return j.(*judge.OpenAI)
}

// A grade from an OpenAI-compatible endpoint: the request as the reference
// documents it (checked by the fake), the grade with graded_by naming the
// model and prompt_digest the digest of the body sent.
func TestOpenAIGrade(t *testing.T) {
	f := judgetest.NewOpenAI(t, model, "sk-test")
	f.Script = func(n int, c string) judgetest.Reply {
		if c != "hc-1" {
			t.Errorf("the prompt names criterion %q", c)
		}
		return judgetest.Reply{Score: 0.7, Rationale: "alice was created"}
	}
	resp, err := openAI(t, f, 0).Judge(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	f.CheckShapes(t)
	if resp.Score != 0.7 || resp.Rationale != "alice was created" || resp.GradedBy != "model:openai:"+model {
		t.Fatalf("grade %+v", resp)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := reqs[0].Body
	rf, _ := body["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Fatalf("no json_schema response_format: %v", body)
	}
	msgs := body["messages"].([]any)
	user := msgs[len(msgs)-1].(map[string]any)["content"].(string)
	for _, want := range []string{"The summary is accurate", "The summary names the user created", `"target_username":"alice"`, `"iam_create_user":1`} {
		if !strings.Contains(user, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, user)
		}
	}
	if d, _ := judge.Digest(body); resp.PromptDigest != d || !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("prompt_digest %q, want the digest of the body sent %q", resp.PromptDigest, d)
	}
	// The same criterion is the same prompt.
	again, err := openAI(t, f, 0).Judge(context.Background(), request())
	if err != nil || again.PromptDigest != resp.PromptDigest {
		t.Fatalf("same request, digest %q then %q (%v)", resp.PromptDigest, again.PromptDigest, err)
	}
}

// A server that refuses response_format with a 400 naming it is asked once
// more without it, and the content is parsed strictly; the digest is of the
// request that got the grade.
func TestOpenAIFallbackWithoutResponseFormat(t *testing.T) {
	f := judgetest.NewOpenAI(t, model, "sk-test")
	f.RejectResponseFormat = true
	f.Script = func(int, string) judgetest.Reply {
		return judgetest.Reply{Content: "```json\n{\"score\": 0.25, \"rationale\": \"weak\"}\n```"}
	}
	resp, err := openAI(t, f, 0).Judge(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	f.CheckShapes(t)
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].Body["response_format"] == nil || reqs[1].Body["response_format"] != nil {
		t.Fatalf("want one request with response_format then one without; got %d", len(reqs))
	}
	if d, _ := judge.Digest(reqs[1].Body); resp.Score != 0.25 || resp.PromptDigest != d {
		t.Fatalf("grade %+v, digest want %s", resp, d)
	}
}

// Everything that is not a grade is an error naming why, after bounded
// retries where retrying can help.
func TestOpenAIFailures(t *testing.T) {
	cases := []struct {
		name     string
		replies  []judgetest.Reply
		timeout  time.Duration
		requests int
		want     string
	}{
		{"429 then a grade (Retry-After 0)", []judgetest.Reply{{Status: 429, ErrorType: "requests", Message: "Rate limit reached", RetryAfter: "0"}, {Score: 1}}, 0, 2, ""},
		{"503 then a grade", []judgetest.Reply{{Status: 503, Message: "overloaded", RetryAfter: "0"}, {Score: 0}}, 0, 2, ""},
		{"429 every time", []judgetest.Reply{{Status: 429, ErrorType: "requests", Message: "Rate limit reached", RetryAfter: "0"}}, 0, 3, "HTTP 429: Rate limit reached (requests) (gave up after 3 attempts)"},
		{"429 asking for an hour", []judgetest.Reply{{Status: 429, ErrorType: "tokens", Message: "Rate limit reached", RetryAfter: "3600"}}, 0, 1, "more than the 20s this judge waits"},
		{"400 error body", []judgetest.Reply{{Status: 400, ErrorType: "invalid_request_error", ErrorParam: "messages", Message: "Invalid 'messages'"}}, 0, 1, "HTTP 400: Invalid 'messages' (invalid_request_error)"},
		{"401 bad key", []judgetest.Reply{{Status: 401, ErrorType: "invalid_request_error", Message: "Incorrect API key provided"}}, 0, 1, "HTTP 401: Incorrect API key provided"},
		{"404 unknown model", []judgetest.Reply{{Status: 404, ErrorType: "invalid_request_error", Message: "The model does not exist"}}, 0, 1, "HTTP 404"},
		{"refusal", []judgetest.Reply{{Refusal: "I can't help with that."}}, 0, 1, "the model refused: I can't help with that."},
		{"finish_reason length", []judgetest.Reply{{Content: `{"score": 0.5, "rat`, Finish: "length"}}, 0, 1, "cut at the token limit"},
		{"finish_reason content_filter", []judgetest.Reply{{Content: "", Finish: "content_filter"}}, 0, 1, "content filter"},
		{"prose, not JSON", []judgetest.Reply{{Content: "I would give it 0.8."}}, 0, 1, "the answer is not a score"},
		{"text after the object", []judgetest.Reply{{Content: `{"score": 0.8, "rationale": "ok"} and more`}}, 0, 1, "text after the JSON object"},
		{"score out of range", []judgetest.Reply{{Content: `{"score": 1.5, "rationale": "ok"}`}}, 0, 1, "the answer is not a score"},
		{"score missing", []judgetest.Reply{{Content: `{"rationale": "ok"}`}}, 0, 1, "the answer is not a score"},
		{"score a string", []judgetest.Reply{{Content: `{"score": "0.8", "rationale": "ok"}`}}, 0, 1, "the answer is not a score"},
		{"timeout", []judgetest.Reply{{Score: 1, Delay: 5 * time.Second}}, 200 * time.Millisecond, 1, "timed out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := judgetest.NewOpenAI(t, model, "sk-test")
			f.Script = func(n int, _ string) judgetest.Reply {
				if n < len(c.replies) {
					return c.replies[n]
				}
				return c.replies[len(c.replies)-1]
			}
			resp, err := openAI(t, f, c.timeout).Judge(context.Background(), request())
			f.CheckShapes(t)
			if n := len(f.Requests()); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
			if c.want == "" {
				if err != nil || resp == nil {
					t.Fatalf("want a grade, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q, got the grade %+v", c.want, resp)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

const modelID = "anthropic.claude-3-haiku-20240307-v1:0"

func bedrock(t testing.TB, f *judgetest.Bedrock, timeout time.Duration) *judge.Bedrock {
	t.Helper()
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	// The production retryer (BedrockMaxAttempts) without its backoff.
	client := judge.NewBedrockClient(ac, f.URL, func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
	return &judge.Bedrock{Client: client, ModelID: modelID, Timeout: timeout}
}

// A grade from Bedrock's Converse: a SigV4-signed request of the documented
// shape (checked by the fake), graded_by naming the model id, prompt_digest
// the digest of the Converse body plus modelId.
func TestBedrockGrade(t *testing.T) {
	f := judgetest.NewBedrock(t, modelID)
	f.Script = func(n int, c string) judgetest.Reply {
		if c != "hc-1" {
			t.Errorf("the prompt names criterion %q", c)
		}
		return judgetest.Reply{Score: 0.9, Rationale: "alice was created"}
	}
	resp, err := bedrock(t, f, 0).Judge(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	f.CheckShapes(t)
	if resp.Score != 0.9 || resp.GradedBy != "model:bedrock:"+modelID {
		t.Fatalf("grade %+v", resp)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	doc := map[string]any{"modelId": modelID}
	for k, v := range reqs[0].Body {
		doc[k] = v
	}
	if d, _ := judge.Digest(doc); resp.PromptDigest != d {
		t.Fatalf("prompt_digest %q, want the digest of the Converse body with modelId %q", resp.PromptDigest, d)
	}
	if ic := reqs[0].Body["inferenceConfig"].(map[string]any); ic["temperature"] != float64(0) {
		t.Fatalf("inferenceConfig %v", ic)
	}
}

func TestBedrockFailures(t *testing.T) {
	throttled := judgetest.Reply{Status: 429, ErrorType: "ThrottlingException", Message: "Too many requests, please wait before trying again."}
	cases := []struct {
		name     string
		replies  []judgetest.Reply
		timeout  time.Duration
		requests int
		want     string
	}{
		{"throttled twice, then a grade", []judgetest.Reply{throttled, throttled, {Score: 0.5}}, 0, 3, ""},
		{"throttled every time", []judgetest.Reply{throttled}, 0, judge.BedrockMaxAttempts, "Bedrock answered ThrottlingException after 3 attempts: Too many requests"},
		{"service unavailable, then a grade", []judgetest.Reply{{Status: 503, ErrorType: "ServiceUnavailableException", Message: "busy"}, {Score: 0.5}}, 0, 2, ""},
		{"validation", []judgetest.Reply{{Status: 400, ErrorType: "ValidationException", Message: "The provided model identifier is invalid."}}, 0, 1, "Bedrock answered ValidationException: The provided model identifier is invalid."},
		{"access denied", []judgetest.Reply{{Status: 403, ErrorType: "AccessDeniedException", Message: "You don't have access to the model with the specified model ID."}}, 0, 1, "AccessDeniedException"},
		{"not found", []judgetest.Reply{{Status: 404, ErrorType: "ResourceNotFoundException", Message: "Model not found"}}, 0, 1, "ResourceNotFoundException"},
		{"max_tokens", []judgetest.Reply{{Content: `{"score": 0.5, "rati`, Finish: "max_tokens"}}, 0, 1, "stopReason max_tokens"},
		{"guardrail", []judgetest.Reply{{Content: "Sorry.", Finish: "guardrail_intervened"}}, 0, 1, "stopReason guardrail_intervened"},
		{"content filtered", []judgetest.Reply{{Content: "", Finish: "content_filtered"}}, 0, 1, "stopReason content_filtered"},
		{"prose", []judgetest.Reply{{Content: "Score: 0.8"}}, 0, 1, "the answer is not a score"},
		{"negative score", []judgetest.Reply{{Content: `{"score": -0.1, "rationale": "x"}`}}, 0, 1, "the answer is not a score"},
		{"timeout", []judgetest.Reply{{Score: 1, Delay: 5 * time.Second}}, 300 * time.Millisecond, 1, "timed out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := judgetest.NewBedrock(t, modelID)
			f.Script = func(n int, _ string) judgetest.Reply {
				if n < len(c.replies) {
					return c.replies[n]
				}
				return c.replies[len(c.replies)-1]
			}
			resp, err := bedrock(t, f, c.timeout).Judge(context.Background(), request())
			f.CheckShapes(t)
			if n := len(f.Requests()); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
			if c.want == "" {
				if err != nil || resp == nil {
					t.Fatalf("want a grade, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q, got the grade %+v", c.want, resp)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// The protocol judge's grades are graded_by model:judge with the digest of
// the JudgeRequest it sent.
func TestClientGradedByAndDigest(t *testing.T) {
	var got []byte
	srv := newJudgeServer(t, &got)
	j, err := judge.New(context.Background(), judge.Config{URL: srv, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := j.Judge(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := judge.Digest(request())
	if resp.GradedBy != judge.GradedByJudge || resp.PromptDigest != want {
		t.Fatalf("%+v, want digest %s", resp, want)
	}
}

// New refuses a configuration it cannot build, naming what is missing, and
// builds nothing when nothing is configured.
func TestNewConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  judge.Config
		want string
	}{
		{judge.Config{Kind: "openai", URL: "http://127.0.0.1:1/v1"}, "a base URL and a model are required"},
		{judge.Config{Kind: "openai", Model: "m"}, "a base URL and a model are required"},
		{judge.Config{Kind: "bedrock"}, "a model id is required"},
		{judge.Config{Kind: "http"}, "a URL is required"},
		{judge.Config{Kind: "gemini", URL: "x"}, `judge kind "gemini" is not one of http, openai, bedrock`},
	} {
		if _, err := judge.New(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
	if j, err := judge.New(context.Background(), judge.Config{}); j != nil || err != nil {
		t.Fatalf("no configuration built %v, %v", j, err)
	}
}

func newJudgeServer(t testing.TB, got *[]byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"score": 1, "rationale": "ok"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
