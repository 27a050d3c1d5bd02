package app

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/agentclock/clockwork/internal/awsclient"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/judge"
	"github.com/agentclock/clockwork/internal/judge/judgetest"
)

// putJudgeKeyParameter stores the openai judge's API key as an SSM
// SecureString on the emulator, where the AWS runtime reads it
// (JUDGE_API_KEY_PARAMETER), and returns its name.
func putJudgeKeyParameter(t *testing.T, table, key string) string {
	t.Helper()
	ac, err := awsclient.Config(context.Background(), emulatorEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	name := "/clockwork/test/" + table + "/judge-api-key"
	if _, err := ssm.NewFromConfig(ac).PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true), Value: aws.String(key),
	}); err != nil {
		t.Fatalf("put the judge's API key in SSM: %v", err)
	}
	return name
}

// heuristicVariant is the seed's ANTICIPATE with a MODEL grading policy and
// the given HEURISTIC criteria added (weight 0.25 each).
func heuristicVariant(t *testing.T, antID, planID string, criteria ...string) []byte {
	return variant(t, antID, planID, func(m map[string]any) {
		m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
		ex := m["expectations"].(map[string]any)
		for _, id := range criteria {
			ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any),
				map[string]any{"criterion_id": id, "description": "Criterion " + id + " holds", "measurement": "HEURISTIC",
					"assertion": "The summary for " + id + " is professional", "weight": 0.25})
		}
	})
}

// checkModelGrade checks a model's grade as the VERIFY records it: graded by
// the judge and model, and prompt_digest the digest of the request the fake
// received for that criterion.
func checkModelGrade(t *testing.T, r anticipate.Result, gradedBy string, reqs []judgetest.Request, body func(judgetest.Request) any) {
	t.Helper()
	if r.Status == anticipate.StatusPending || r.GradedBy != gradedBy {
		t.Fatalf("%s: %+v, want graded by %s", r.CriterionID, r, gradedBy)
	}
	for _, req := range reqs {
		b := body(req)
		if d, _ := judge.Digest(b); d == r.PromptDigest {
			return
		}
	}
	t.Fatalf("%s: prompt_digest %q is the digest of no request the model received", r.CriterionID, r.PromptDigest)
}

// scenarioModelJudges grades HEURISTIC criteria through the two model
// judges, each against its wire-faithful fake (internal/judge/judgetest):
// an OpenAI-compatible Chat Completions endpoint and Bedrock's Converse.
// A grade records who graded and the prompt digest, under the VERIFY's
// seal; a refusal, throttling past the bounded retries, a validation error
// and an answer that is not a score leave their criteria PENDING with the
// reason. In the AWS mode the openai judge's key comes from an SSM
// SecureString, as it does on AWS; the fake checks it is sent.
func scenarioModelJudges(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		const model = "gpt-4o-mini"
		f := judgetest.NewOpenAI(t, model, "sk-e2e")
		f.Script = func(n int, c string) judgetest.Reply {
			switch c {
			case "hc-good":
				return judgetest.Reply{Score: 0.9, Rationale: "the summary is professional"}
			case "hc-refused":
				return judgetest.Reply{Refusal: "I can't grade that."}
			case "hc-throttled":
				return judgetest.Reply{Status: 429, ErrorType: "requests", Message: "Rate limit reached", RetryAfter: "0"}
			default:
				return judgetest.Reply{Content: "Looks fine to me."}
			}
		}
		e := startEnv(t, func(c *Config) {
			c.JudgeKind, c.JudgeURL, c.JudgeModel, c.JudgeAPIKey, c.AllowPrivateJudge = judge.KindOpenAI, f.BaseURL(), model, "sk-e2e", true
		})
		e.must(201, e.call("POST", "/v1/anticipations", heuristicVariant(t, "ant-oai", "plan-oai", "hc-good", "hc-refused", "hc-throttled", "hc-prose")))
		runPlan(t, e, "plan-oai", 3, nil, allGood())
		v := e.waitVerification("ant-oai")
		f.CheckShapes(t)
		checkModelGrade(t, result(t, v, "hc-good"), "model:openai:"+model, f.Requests(), func(r judgetest.Request) any { return r.Body })
		for id, reason := range map[string]string{"hc-refused": "the model refused", "hc-throttled": "HTTP 429", "hc-prose": "the answer is not a score"} {
			if r := result(t, v, id); r.Status != anticipate.StatusPending || !strings.Contains(r.Evidence, reason) || r.PromptDigest != "" {
				t.Errorf("%s: %+v, want PENDING naming %q", id, r, reason)
			}
		}
		if err := anticipate.CheckSeal(&v); err != nil {
			t.Fatalf("the VERIFY with model grades does not check: %v", err)
		}
		checkBundleOffline(t, e, v.VerificationID)
	})
	t.Run("bedrock", func(t *testing.T) {
		const modelID = "anthropic.claude-3-haiku-20240307-v1:0"
		f := judgetest.NewBedrock(t, modelID)
		f.Script = func(n int, c string) judgetest.Reply {
			switch c {
			case "hc-good":
				return judgetest.Reply{Score: 0.6, Rationale: "mostly professional"}
			case "hc-invalid":
				return judgetest.Reply{Status: 400, ErrorType: "ValidationException", Message: "The provided model identifier is invalid."}
			default:
				return judgetest.Reply{Content: `{"score": 7, "rationale": "out of ten"}`}
			}
		}
		e := startEnv(t, func(c *Config) { c.JudgeKind, c.JudgeURL, c.JudgeModel = judge.KindBedrock, f.URL, modelID })
		e.must(201, e.call("POST", "/v1/anticipations", heuristicVariant(t, "ant-br", "plan-br", "hc-good", "hc-invalid", "hc-ten")))
		runPlan(t, e, "plan-br", 3, nil, allGood())
		v := e.waitVerification("ant-br")
		f.CheckShapes(t)
		checkModelGrade(t, result(t, v, "hc-good"), "model:bedrock:"+modelID, f.Requests(), func(r judgetest.Request) any {
			doc := map[string]any{"modelId": modelID}
			for k, val := range r.Body {
				doc[k] = val
			}
			return doc
		})
		for id, reason := range map[string]string{"hc-invalid": "ValidationException", "hc-ten": "the answer is not a score"} {
			if r := result(t, v, id); r.Status != anticipate.StatusPending || !strings.Contains(r.Evidence, reason) {
				t.Errorf("%s: %+v, want PENDING naming %q", id, r, reason)
			}
		}
		if err := anticipate.CheckSeal(&v); err != nil {
			t.Fatalf("the VERIFY with model grades does not check: %v", err)
		}
		checkBundleOffline(t, e, v.VerificationID)
	})
}
