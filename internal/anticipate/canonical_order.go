package anticipate

// verificationInOrder is Verification with its members in RFC 8785 order
// (their names' UTF-16 code units), and resultInOrder Result's, so that
// encoding/json writes a VERIFY in its canonical form (verifyCanonical).
// They hold the same members as the types they mirror
// (TestCanonicalOrderMirrorsTheTypes); a mistake in their order only
// costs the transform, never the digest.
type verificationInOrder struct {
	AgentID            string          `json:"agent_id"`
	AntiCriteriaFailed []string        `json:"anti_criteria_failed"`
	AnticipationDigest string          `json:"anticipation_digest"`
	AnticipationID     string          `json:"anticipation_id"`
	AppID              string          `json:"app_id"`
	CriteriaDigest     string          `json:"criteria_digest,omitempty"`
	DDNASignature      string          `json:"d_dna_signature"`
	Evaluator          string          `json:"evaluator,omitempty"`
	ExecutionDigest    string          `json:"execution_digest"`
	MessageType        string          `json:"message_type"`
	PassingThreshold   float64         `json:"passing_threshold"`
	PlanID             string          `json:"plan_id"`
	ProtocolVersion    string          `json:"protocol_version"`
	Results            []resultInOrder `json:"results"`
	Sampled            bool            `json:"sampled,omitempty"`
	Score              float64         `json:"score"`
	ServerSignature    string          `json:"server_signature,omitempty"`
	SessionID          string          `json:"session_id"`
	Timestamp          string          `json:"timestamp"`
	Verdict            Verdict         `json:"verdict"`
	VerificationID     string          `json:"verification_id"`
}

type resultInOrder struct {
	Category     Category    `json:"category"`
	CriterionID  string      `json:"criterion_id"`
	Evidence     string      `json:"evidence"`
	GradedBy     string      `json:"graded_by"`
	Measurement  Measurement `json:"measurement"`
	PromptDigest string      `json:"prompt_digest,omitempty"`
	Rationale    string      `json:"rationale,omitempty"`
	Score        *float64    `json:"score"`
	Status       Status      `json:"status"`
	Weight       float64     `json:"weight"`
}

// canonicalOrder copies v into verificationInOrder.
func canonicalOrder(v *Verification) verificationInOrder {
	out := verificationInOrder{
		AgentID: v.AgentID, AntiCriteriaFailed: v.AntiCriteriaFailed, AnticipationDigest: v.AnticipationDigest,
		AnticipationID: v.AnticipationID, AppID: v.AppID, DDNASignature: v.DDNASignature, ExecutionDigest: v.ExecutionDigest,
		MessageType: v.MessageType, PassingThreshold: v.PassingThreshold, PlanID: v.PlanID, ProtocolVersion: v.ProtocolVersion,
		Score: v.Score, ServerSignature: v.ServerSignature, SessionID: v.SessionID, Timestamp: v.Timestamp,
		Verdict: v.Verdict, VerificationID: v.VerificationID, Sampled: v.Sampled, Evaluator: v.Evaluator, CriteriaDigest: v.CriteriaDigest,
	}
	if v.Results != nil {
		out.Results = make([]resultInOrder, len(v.Results))
		for i, r := range v.Results {
			out.Results[i] = resultInOrder{Category: r.Category, CriterionID: r.CriterionID, Evidence: r.Evidence, GradedBy: r.GradedBy,
				Measurement: r.Measurement, PromptDigest: r.PromptDigest, Rationale: r.Rationale, Score: r.Score, Status: r.Status, Weight: r.Weight}
		}
	}
	return out
}
