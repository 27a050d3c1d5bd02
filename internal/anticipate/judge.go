package anticipate

import (
	"encoding/json"
	"errors"

	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
)

// ErrNotAGrade is wrapped by a judge's error when the judge answered but
// its answer cannot be a grade (not a score, refused, cut off, withheld):
// asking again would get the same answer, so the criterion is left
// pending with the reason rather than retried. Any other judge error
// (unreachable, timed out, throttled, a 5xx) is worth another attempt.
var ErrNotAGrade = errors.New("the judge's answer is not a grade")

// JudgeEvidence is what a model judge sees of an execution.
type JudgeEvidence struct {
	Trajectory       TrajectorySummary `json:"trajectory"`        // counts and timing of the execution
	OutcomeVariables map[string]any    `json:"outcome_variables"` // merged OUTCOME variables
}

// JudgeRequest asks a model judge to grade one HEURISTIC criterion. The
// HTTP call is made by the caller; the judge answers with a JudgeResponse.
type JudgeRequest struct {
	VerificationID string        `json:"verification_id"` // the VERIFY being graded
	CriterionID    string        `json:"criterion_id"`    // the HEURISTIC criterion
	Description    string        `json:"description"`     // its description
	Assertion      string        `json:"assertion"`       // its natural-language assertion
	Evidence       JudgeEvidence `json:"evidence"`        // what happened
}

// JudgeResponse is a model judge's grade: a score in [0, 1] and its
// rationale.
type JudgeResponse struct {
	Score     float64 `json:"score"`     // required, in [0, 1]
	Rationale string  `json:"rationale"` // optional explanation
	// GradedBy and PromptDigest are set by the judge client, not read from
	// the answer: who graded ("model:judge", "model:openai:<model>",
	// "model:bedrock:<modelId>") and the digest of the request that got the
	// grade (see Result.PromptDigest).
	GradedBy     string `json:"-"`
	PromptDigest string `json:"-"`
}

// JudgeRequests returns one request per PENDING HEURISTIC result of v, in
// result order, with the criterion's description and assertion from a and
// the evidence from env (nil env means an empty execution). It returns nil
// when nothing awaits the judge or when a or v does not describe the
// criterion.
func JudgeRequests(v Verification, a *Anticipation, env *assertion.Env) []JudgeRequest {
	if a == nil || v.Verdict.Final() {
		return nil
	}
	byID := map[string]Criterion{}
	for _, c := range a.Criteria() {
		byID[c.CriterionID] = c.Criterion
	}
	ev := JudgeEvidence{Trajectory: SummaryOf(env.Trajectory()), OutcomeVariables: env.Variables()}
	var out []JudgeRequest
	for _, r := range v.Results {
		c, ok := byID[r.CriterionID]
		if !ok || r.Status != StatusPending || c.Measurement != Heuristic {
			continue
		}
		out = append(out, JudgeRequest{
			VerificationID: v.VerificationID,
			CriterionID:    c.CriterionID,
			Description:    c.Description,
			Assertion:      c.Assertion,
			Evidence:       ev,
		})
	}
	return out
}

// ValidateJudgeResponse decodes a model judge's answer. Unknown fields are
// ignored (judges are often wrappers around a model API). It returns an
// *errs.Error with Code errs.Invalid, naming the field, when raw is not a
// JSON object, score is missing, null, not a number or outside [0, 1], or
// rationale is present but not a string or longer than MaxRationaleLen
// bytes.
func ValidateJudgeResponse(raw []byte) (*JudgeResponse, error) {
	if _, err := Canonical(raw); err != nil {
		return nil, errs.E(errs.Invalid, "judge response is not valid JSON")
	}
	var c errs.Collector
	o, ok := decodeObject(&c, "", raw, true)
	if !ok {
		return nil, errs.E(errs.Invalid, "judge response must be a JSON object")
	}
	resp := &JudgeResponse{}
	resp.Score, _ = o.unit("score")
	if raw := o.get("rationale"); raw != nil {
		if err := json.Unmarshal(raw, &resp.Rationale); err != nil {
			c.Add("rationale", "must be a string")
		} else if len(resp.Rationale) > MaxRationaleLen {
			c.Add("rationale", "is longer than %d bytes", MaxRationaleLen)
		}
	}
	if err := c.Err("invalid judge response"); err != nil {
		return nil, err
	}
	return resp, nil
}
