// Package anticipate is the pure domain of the post-hoc evaluation loop
// (AIGP RFC-032 section 3, the ANTICIPATE message, and design.md section 4,
// the VERIFY message we define): validation, the d_dna_signature, sealing
// rules, execution events, the digest chain, scoring and verdicts, grades
// and the model-judge exchange. It does no I/O: the store, the HTTP API and
// the change-feed processor call these functions and persist the results.
//
// # ANTICIPATE
//
// Validate checks a message strictly. Field names match exactly (case
// included). Top-level fields it does not interpret are kept in Raw (named
// in Extra) and so covered by d_dna_signature; unknown fields inside
// expectations, its criteria and grading_policy are rejected, since they
// could change what success means. Beyond the seed's fields the message
// may carry one optional top-level field, "emitter":
// "application" (the default when absent), "governance_authority" or
// "external_evaluator" (RFC-032 section 3.6). Being part of the message, it
// is covered by d_dna_signature.
//
// Required: protocol_version (any non-empty string up to 32 bytes; the
// seed's table omits it but its example carries it and VERIFY echoes it),
// message_type ("ANTICIPATE"), app_id, agent_id, anticipation_id,
// scope_envelope_id, session_id, timestamp (RFC 3339, any offset, stored in
// UTC), expectations, grading_policy and d_dna_signature. plan_id is
// optional. Each of outcome_criteria, trajectory_criteria and anti_criteria
// may be absent or null (empty); every criterion needs all five fields.
// Ids are 1 to 128 bytes without control characters or surrounding white
// space; descriptions and assertions at most 4096 bytes; at most 200
// criteria in total; criterion ids are unique across the three categories.
// A message is rejected as a policy that can never fail when it has no
// criteria; when weighted_scoring is true and every weight is 0 (the score
// would be 0/0); and when passing_threshold is 0 unless
// fail_on_any_anti_criteria is true and there is at least one anti
// criterion (a threshold of 0 passes every score, so only an enforced anti
// criterion can still fail it).
//
// # Digests
//
// d_dna_signature is "sha256:" and the 64 lowercase hex digits of SHA-256
// over the RFC 8785 (JCS) canonical JSON of the message with its top-level
// d_dna_signature removed (Digest, Sign). Canonicalization uses
// github.com/gowebpki/jcs, a maintained port of the RFC's reference
// implementation (ECMAScript number formatting, UTF-16 key order); it
// rejects duplicate keys, invalid UTF-8, lone surrogates and numbers
// outside the double range, so a message with two meanings cannot be
// signed. A message's digest is its d_dna_signature: the anticipation
// digest returned on create and carried as anticipation_digest in VERIFY.
//
// The execution chain is per plan: an event's digest is "sha256:" and the
// hex SHA-256 of the previous event's digest string (GenesisDigest, the
// empty string, for the plan's first event) followed by the canonical JSON
// of the event as received (ChainDigest). It does not depend on the
// anticipations bound to the plan, so one chain serves all of them; a
// VERIFY binds them together by carrying both anticipation_digest and
// execution_digest (the chain head) under its own d_dna_signature.
// Duplicate event ids are not chained again.
//
// # Sealing and binding
//
// An ANTICIPATE with plan_id binds to that plan; one without binds to every
// plan executed under its scope_envelope_id. The first TOOL_REQUEST or
// STEP_COMPLETE of a plan (SealsOn) seals every anticipation bound to it,
// atomically with storing that event. CheckNew refuses (409) a new
// ANTICIPATE for a plan whose execution has begun; CheckUpdate accepts an
// identical re-submission (equal canonical JSON) as an idempotent retry,
// refuses (409) any other change to a sealed anticipation and lets an
// unsealed one be replaced (callers also apply CheckNew to the new
// plan_id). anticipation_id cannot change.
//
// # Execution events
//
// Execution events are RFC-032 messages: message_type names the type and
// protocol_version (optional, at most 32 bytes) is kept as sent.
// TOOL_REQUEST (tool, optional arguments object), TOOL_RESULT (tool, status
// SUCCESS, ERROR, TIMEOUT or DENIED in any letter case, kept upper-cased in
// Event.Status; every status but SUCCESS counts in error_count),
// STEP_COMPLETE, ESCALATION, OUTCOME (variables object, observations
// [{"call","args","value"}]) and PLAN_COMPLETE, each with event_id,
// message_type and an RFC 3339 timestamp, optionally plan_id,
// scope_envelope_id, session_id and agent_id. event_type, this API's
// earlier name for the type, is refused with an error saying to send
// message_type. A field interpreted on another event type is rejected (it
// would be ignored). Fields interpreted on no event type are kept in Raw,
// chained and named in Extra, within the limits of extras (MaxExtraFields,
// valid names, none equal to a known name but for letter case). Several
// OUTCOME events merge in storage order: a later variable or an
// observation with the same call and arguments wins. duration_seconds is
// the last event timestamp minus the first.
//
// # Scoring and verdicts
//
// Each criterion scores s in [0, 1]. DETERMINISTIC: 1 when its assertion is
// true (PASS), 0 when false (FAIL), 0 with status ERROR and the reason as
// evidence when it cannot be evaluated (a missing variable or observation,
// for example). HEURISTIC and HUMAN: PENDING (score null) until a grade
// arrives (ApplyGrade), then the grade; their status is PASS when the
// score reaches passing_threshold (anti criteria: when it is 1), else FAIL.
// Assertions mean "as hoped" in every category, anti criteria included
// (tool_invoked('x') == false).
//
// With weighted_scoring the score is sum(w*s)/sum(w), otherwise the plain
// mean, over all criteria of the three categories. While criteria are
// PENDING the reported score is the same formula over the graded criteria
// only (ERROR counts as graded with 0; 0 when nothing is graded yet).
// Scores are rounded to 6 decimal places, and the rounded score is what is
// compared with passing_threshold, so the reported score and the verdict
// always agree (the seed's four-step case reports 0.861111).
//
// anti_criteria_failed lists every graded anti criterion scored below 1
// (ERROR included). Verdict: FAIL when fail_on_any_anti_criteria and that
// list is not empty; otherwise, while any criterion is PENDING, FAIL when
// even full marks on every PENDING criterion could not reach the threshold,
// else PENDING; otherwise PASS when score >= passing_threshold, else FAIL.
// PASS and FAIL are final: a grade for a criterion that already has one,
// or for a VERIFY with a final verdict, is 409 (errs.Conflict).
//
// # VERIFY
//
// Verification is the VERIFY message of design.md section 4, plus
// per-result "rationale" for graded criteria and the optional
// "server_signature". Category is "outcome", "trajectory" or "anti";
// graded_by is "code" for DETERMINISTIC criteria and "" while PENDING.
// verification_id defaults to VerificationIDFor(anticipation digest,
// plan_id), so re-running VERIFY for the same pair is idempotent. timestamp
// is the time of the latest change (grading or the last grade).
// d_dna_signature is computed like ANTICIPATE's, over the VERIFY exactly as
// returned without d_dna_signature alone (Seal, CheckSeal); when the server
// signs, server_signature is "ed25519:" and the unpadded base64url Ed25519
// signature of the canonical VERIFY without both fields, made first, so
// that d_dna_signature covers it (SignEd25519, VerifyEd25519).
//
// # Model judge
//
// HEURISTIC criteria are sent to a judge as JudgeRequest (the trajectory
// summary and the OUTCOME variables as evidence); the answer is checked
// with ValidateJudgeResponse and applied with ApplyGrade.
//
// # Errors
//
// Every error is an *errs.Error: errs.Invalid with field paths such as
// "expectations.trajectory_criteria[0].assertion" for validation, and
// errs.Conflict for sealing and final verdicts. Nothing in this package
// panics on any input.
package anticipate
