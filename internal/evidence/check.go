package evidence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/gowebpki/jcs"
)

// Options tune Check.
type Options struct {
	// TrustedKey, when set, is the server's public key obtained out of band
	// (GET /v1/keys/verify on a server you trust, or its operator): the
	// bundle's key must be this one and the VERIFY must be signed with it.
	// Without it the bundle's own key is used, which proves integrity but
	// not who signed: anyone can re-sign a bundle with a key of their own.
	TrustedKey ed25519.PublicKey
}

// Finding is the outcome of one check.
type Finding struct {
	Link   string // what was checked, e.g. "events[3]" or "verification.d_dna_signature"
	OK     bool
	Detail string
}

// Report is what Check found. The checks run in chain order (bundle,
// public key, ANTICIPATE, each event, VERIFY, re-grading) and stop at the
// first broken link, except re-grading, which reports every difference.
type Report struct {
	Findings []Finding
	// Notes say what could not be checked, and why.
	Notes []string
	// Events is the number of events in the chain; Regraded the number of
	// DETERMINISTIC criteria graded again from them.
	Events, Regraded int
	// Verdict and Score are the VERIFY's, as checked.
	Verdict anticipate.Verdict
	Score   float64
}

// OK reports whether every check held.
func (r *Report) OK() bool { return r.FirstBroken() == nil }

// FirstBroken returns the first check that failed, or nil.
func (r *Report) FirstBroken() *Finding {
	for i := range r.Findings {
		if !r.Findings[i].OK {
			return &r.Findings[i]
		}
	}
	return nil
}

func (r *Report) ok(link, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Link: link, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (r *Report) broken(link, format string, args ...any) *Report {
	r.Findings = append(r.Findings, Finding{Link: link, Detail: fmt.Sprintf(format, args...)})
	return r
}

// checker carries what earlier checks established to later ones.
type checker struct {
	opt   Options
	rep   *Report
	key   ed25519.PublicKey
	ant   *anticipate.Anticipation
	vraw  json.RawMessage
	v     anticipate.Verification
	head  string
	agg   anticipate.Aggregate
	count int
}

// Check checks an evidence bundle and returns what it found; it never
// panics on any input. Every digest is recomputed from the messages in the
// bundle: the ANTICIPATE's d_dna_signature (the seed's rule), each event's
// chain digest from the previous one, the VERIFY's anticipation_digest,
// execution_digest and d_dna_signature, and its server_signature against
// the bundle's public key (or opt.TrustedKey). Then every DETERMINISTIC
// criterion is graded again from the events, HEURISTIC and HUMAN grades
// are taken as stated (they are signed, not recomputable), and the score,
// verdict and failed anti criteria are tallied again; every difference is
// reported.
func Check(raw []byte, opt Options) *Report {
	c := &checker{opt: opt, rep: &Report{}}
	members, ok := c.bundle(raw)
	if !ok {
		return c.rep
	}
	for _, step := range []func(map[string]json.RawMessage) bool{c.publicKey, c.anticipation, c.decodeVerify, c.events, c.verification, c.regrade} {
		if !step(members) {
			break
		}
	}
	return c.rep
}

var bundleMembers = []string{"anticipation", "bundle", "events", "public_key", "verification"}

// bundle checks the document as a whole: valid JSON that has an RFC 8785
// canonical form (no duplicate member names, valid UTF-8), exactly the
// bundle's members, and the format.
func (c *checker) bundle(raw []byte) (map[string]json.RawMessage, bool) {
	if _, err := jcs.Transform(raw); err != nil {
		c.rep.broken("bundle", "not a valid JSON document: %v", err)
		return nil, false
	}
	m, msg := exactObject(raw, bundleMembers)
	if msg != "" {
		c.rep.broken("bundle", "%s", msg)
		return nil, false
	}
	var format string
	if !jsonString(m["bundle"], &format) || format != Format {
		c.rep.broken("bundle", "format is %s, want %q", m["bundle"], Format)
		return nil, false
	}
	c.rep.ok("bundle", "%s", Format)
	return m, true
}

// exactObject decodes a JSON object that must have exactly the given
// members; it returns a message saying what is wrong otherwise.
func exactObject(raw []byte, members []string) (map[string]json.RawMessage, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, "is not a JSON object"
	}
	for k := range m {
		if !slices.Contains(members, k) {
			return nil, fmt.Sprintf("has the unknown member %q", k)
		}
	}
	for _, k := range members {
		if _, ok := m[k]; !ok {
			return nil, fmt.Sprintf("lacks the member %q", k)
		}
	}
	return m, ""
}

func (c *checker) publicKey(m map[string]json.RawMessage) bool {
	raw := m["public_key"]
	if string(raw) == "null" {
		if c.opt.TrustedKey != nil {
			c.rep.broken("public_key", "is null, but a trusted key was given: the VERIFY must be signed")
			return false
		}
		c.rep.ok("public_key", "none: the server does not sign")
		return true
	}
	k, msg := exactObject(raw, []string{"alg", "public_key"})
	if msg != "" {
		c.rep.broken("public_key", "%s", msg)
		return false
	}
	var alg, enc string
	if !jsonString(k["alg"], &alg) || alg != KeyAlg {
		c.rep.broken("public_key.alg", "is %s, want %q", k["alg"], KeyAlg)
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(unquote(k["public_key"], &enc))
	if err != nil || len(b) != ed25519.PublicKeySize {
		c.rep.broken("public_key.public_key", "is not the unpadded base64url of a %d-byte Ed25519 key", ed25519.PublicKeySize)
		return false
	}
	if c.opt.TrustedKey != nil && !bytes.Equal(b, c.opt.TrustedKey) {
		c.rep.broken("public_key.public_key", "%s is not the trusted key %s", enc, base64.RawURLEncoding.EncodeToString(c.opt.TrustedKey))
		return false
	}
	c.key = b
	if c.opt.TrustedKey != nil {
		c.rep.ok("public_key", "%s (the trusted key)", enc)
	} else {
		c.rep.ok("public_key", "%s (taken from the bundle)", enc)
		c.rep.Notes = append(c.rep.Notes, "the public key was taken from the bundle: this proves the bundle is intact, not who signed it; pass the server's key (GET /v1/keys/verify) to pin it")
	}
	return true
}

// unquote decodes a JSON string into *s and returns it ("" when raw is
// not a string).
func unquote(raw json.RawMessage, s *string) string {
	if !jsonString(raw, s) {
		*s = ""
	}
	return *s
}

// jsonString decodes raw into *s and reports whether it was a JSON string
// (null, which encoding/json would take as "", is not).
func jsonString(raw json.RawMessage, s *string) bool {
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, s) == nil
}

func (c *checker) anticipation(m map[string]json.RawMessage) bool {
	raw := m["anticipation"]
	a, err := anticipate.Validate(raw)
	if err != nil {
		c.rep.broken("anticipation", "%v", err)
		return false
	}
	// Validate checked d_dna_signature against the seed's rule; say so
	// with the digest recomputed here.
	d, err := anticipate.Digest(raw)
	if err != nil || d != a.DDNASignature {
		c.rep.broken("anticipation.d_dna_signature", "is %s but the message's digest is %s", a.DDNASignature, d)
		return false
	}
	c.ant = a
	c.rep.ok("anticipation", "%s: d_dna_signature %s matches its content", a.AnticipationID, d)
	return true
}

// decodeVerify reads the VERIFY's values (its digests are checked after the
// events).
func (c *checker) decodeVerify(m map[string]json.RawMessage) bool {
	c.vraw = m["verification"]
	if len(c.vraw) == 0 || c.vraw[0] != '{' {
		c.rep.broken("verification", "is not a JSON object")
		return false
	}
	if err := json.Unmarshal(c.vraw, &c.v); err != nil {
		c.rep.broken("verification", "cannot be read as a VERIFY: %v", err)
		return false
	}
	if c.v.PlanID == "" {
		c.rep.broken("verification.plan_id", "is empty")
		return false
	}
	return true
}

var eventMembers = []string{"digest", "event", "prev", "seq"}

// events recomputes the chain from the genesis digest, event by event,
// and folds the events into the aggregate VERIFY grades from.
func (c *checker) events(m map[string]json.RawMessage) bool {
	var list []json.RawMessage
	if err := json.Unmarshal(m["events"], &list); err != nil || list == nil {
		c.rep.broken("events", "is not an array")
		return false
	}
	prev := anticipate.GenesisDigest
	seen := make(map[string]int, len(list))
	for i, raw := range list {
		link := fmt.Sprintf("events[%d]", i)
		em, msg := exactObject(raw, eventMembers)
		if msg != "" {
			c.rep.broken(link, "%s", msg)
			return false
		}
		var seq float64 // 1, 1.0 and 1e0 are one value
		var gotPrev, digest string
		if json.Unmarshal(em["seq"], &seq) != nil || seq != float64(i+1) {
			c.rep.broken(link+".seq", "is %s, want %d (events must be complete and in chain order)", em["seq"], i+1)
			return false
		}
		if !jsonString(em["prev"], &gotPrev) || gotPrev != prev {
			c.rep.broken(link+".prev", "is %s, but the previous event's recomputed digest is %q (an event was removed, inserted or reordered)", em["prev"], prev)
			return false
		}
		want := anticipate.ChainDigest(prev, em["event"])
		if !jsonString(em["digest"], &digest) || want == "" || digest != want {
			c.rep.broken(link+".digest", "is %s, but SHA-256 of the previous digest and the event's canonical JSON is %q (the event or its digest was changed)", em["digest"], want)
			return false
		}
		ev, err := ParseEvent(em["event"])
		if err == nil {
			err = ev.BindPlan(c.v.PlanID)
		}
		if err != nil {
			c.rep.broken(link+".event", "%v", err)
			return false
		}
		if j, dup := seen[ev.EventID]; dup {
			c.rep.broken(link+".event.event_id", "%q repeats events[%d]; the server stores an event id once", ev.EventID, j)
			return false
		}
		seen[ev.EventID] = i
		last := i == len(list)-1
		if (ev.EventType == anticipate.PlanComplete) != last {
			c.rep.broken(link+".event", "a chain ends with its one PLAN_COMPLETE; this %s is event %d of %d", ev.EventType, i+1, len(list))
			return false
		}
		c.agg.Add(ev)
		prev = digest
	}
	if len(list) == 0 {
		c.rep.broken("events", "is empty; a VERIFY grades a completed execution")
		return false
	}
	c.head, c.count = prev, len(list)
	c.rep.Events = len(list)
	c.rep.ok("events", "%d events chain from the genesis digest to %s", len(list), prev)
	return true
}

// verification checks the VERIFY's links to the ANTICIPATE and the chain,
// its d_dna_signature and its server_signature.
func (c *checker) verification(map[string]json.RawMessage) bool {
	v, a := &c.v, c.ant
	antDigest := a.DDNASignature
	if v.MessageType != anticipate.MessageTypeVerify {
		c.rep.broken("verification.message_type", "is %q, want %q", v.MessageType, anticipate.MessageTypeVerify)
		return false
	}
	wantID := anticipate.VerificationIDFor(antDigest, v.PlanID)
	switch {
	case v.Sampled:
		// An online evaluator's VERIFY: its criteria were configured on
		// the server and the stand-in ANTICIPATE was made after the run,
		// so nothing proves they were declared before it.
		if v.AnticipationDigest != "" || v.Evaluator == "" || a.Emitter != anticipate.EmitterExternalEvaluator {
			c.rep.broken("verification.sampled", "a sampled VERIFY has no anticipation_digest, names its evaluator, and its ANTICIPATE is the external evaluator's; this one has anticipation_digest %q, evaluator %q, emitter %q",
				v.AnticipationDigest, v.Evaluator, a.Emitter)
			return false
		}
		if v.CriteriaDigest != antDigest {
			c.rep.broken("verification.criteria_digest", "is %q but the bundled criteria's digest is %q", v.CriteriaDigest, antDigest)
			return false
		}
		c.rep.ok("verification.criteria_digest", "%s", antDigest)
		c.rep.ok("verification.sampled", "graded by online evaluator %s from a sample, with criteria configured on the server: nothing was declared before the run", v.Evaluator)
		c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("sampled by evaluator %s: no ANTICIPATE was declared before the run, so the criteria are not proven to predate it", v.Evaluator))
		wantID = anticipate.SampledVerificationIDFor(v.AgentID, v.Evaluator, v.PlanID)
	case v.AnticipationDigest != antDigest:
		c.rep.broken("verification.anticipation_digest", "is %q but the ANTICIPATE's digest is %q", v.AnticipationDigest, antDigest)
		return false
	default:
		c.rep.ok("verification.anticipation_digest", "%s", antDigest)
	}
	if v.ExecutionDigest != c.head {
		c.rep.broken("verification.execution_digest", "is %q but the recomputed chain ends at %q", v.ExecutionDigest, c.head)
		return false
	}
	c.rep.ok("verification.execution_digest", "%s", c.head)
	d, err := anticipate.Digest(c.vraw)
	if err != nil || d != v.DDNASignature {
		c.rep.broken("verification.d_dna_signature", "is %q but SHA-256 of the VERIFY's canonical JSON without d_dna_signature is %q", v.DDNASignature, d)
		return false
	}
	c.rep.ok("verification.d_dna_signature", "%s", d)
	if !c.signature() {
		return false
	}
	same := []struct{ field, got, want string }{
		{"verification_id", v.VerificationID, wantID},
		{"anticipation_id", v.AnticipationID, a.AnticipationID},
		{"agent_id", v.AgentID, a.AgentID},
		{"app_id", v.AppID, a.AppID},
		{"session_id", v.SessionID, a.SessionID},
		{"protocol_version", v.ProtocolVersion, a.ProtocolVersion},
	}
	if a.PlanID != "" {
		same = append(same, struct{ field, got, want string }{"plan_id", v.PlanID, a.PlanID})
	}
	for _, s := range same {
		if s.got != s.want {
			c.rep.broken("verification."+s.field, "is %q, want %q (from the ANTICIPATE and the plan)", s.got, s.want)
			return false
		}
	}
	if v.PassingThreshold != a.GradingPolicy.PassingThreshold {
		c.rep.broken("verification.passing_threshold", "is %v but the ANTICIPATE's is %v", v.PassingThreshold, a.GradingPolicy.PassingThreshold)
		return false
	}
	c.rep.ok("verification", "%s grades %s on plan %s", v.VerificationID, v.AnticipationID, v.PlanID)
	return true
}

func (c *checker) signature() bool {
	sigText := c.v.ServerSignature
	switch {
	case c.key == nil && sigText == "":
		c.rep.Notes = append(c.rep.Notes, "the VERIFY is not signed (the server has no signing key): d_dna_signature proves it intact, not who wrote it")
		return true
	case c.key == nil:
		c.rep.broken("verification.server_signature", "is present but the bundle has no public key to check it with")
		return false
	case sigText == "":
		c.rep.broken("verification.server_signature", "is missing, but the bundle has the server's key: a signing server signs every VERIFY")
		return false
	}
	sig, err := anticipate.ParseServerSignature(sigText)
	if err != nil {
		c.rep.broken("verification.server_signature", "%v", err)
		return false
	}
	msg, err := anticipate.VerifySignedBytes(c.vraw)
	if err != nil || !ed25519.Verify(c.key, msg, sig) {
		c.rep.broken("verification.server_signature", "does not verify with the public key over the VERIFY's canonical JSON without d_dna_signature and server_signature")
		return false
	}
	c.rep.ok("verification.server_signature", "Ed25519 signature verifies")
	return true
}

// regrade grades every DETERMINISTIC criterion again from the events and
// tallies score, verdict and failed anti criteria again.
func (c *checker) regrade(map[string]json.RawMessage) bool {
	a, v := c.ant, &c.v
	grades := map[string]anticipate.CriterionGrade{}
	for _, r := range v.Results {
		if r.Measurement != anticipate.Deterministic && r.Status != anticipate.StatusPending && r.Score != nil {
			grades[r.CriterionID] = anticipate.CriterionGrade{Score: *r.Score, Rationale: r.Rationale, GradedBy: r.GradedBy}
		}
	}
	env := c.agg.Env(noWatcher{})
	want := anticipate.Grade(a, a.Programs(), env, grades, anticipate.Execution{VerificationID: v.VerificationID, PlanID: v.PlanID, ExecutionDigest: c.head}, time.Time{})
	if len(v.Results) != len(want.Results) {
		c.rep.broken("verification.results", "has %d results but the ANTICIPATE declares %d criteria", len(v.Results), len(want.Results))
		return false
	}
	criteria := a.Criteria()
	final := make([]anticipate.Result, len(want.Results))
	diffs := 0
	differ := func(link, format string, args ...any) {
		diffs++
		c.rep.broken(link, format, args...)
	}
	for i, w := range want.Results {
		got := v.Results[i]
		link := fmt.Sprintf("verification.results[%d] (%s)", i, w.CriterionID)
		if got.CriterionID != w.CriterionID || got.Category != w.Category || got.Measurement != w.Measurement || got.Weight != w.Weight {
			differ(link, "is %s/%s/%s/weight %v, but the ANTICIPATE declares %s/%s/%s/weight %v",
				got.CriterionID, got.Category, got.Measurement, got.Weight, w.CriterionID, w.Category, w.Measurement, w.Weight)
			continue
		}
		final[i] = w
		switch {
		case w.Measurement == anticipate.Deterministic && usesWatcher(a, criteria[i]):
			final[i] = got
			c.rep.Notes = append(c.rep.Notes, fmt.Sprintf("%s reads the watcher's records (expectation_state, lapse_count), which a bundle does not hold: its %s is taken as signed", w.CriterionID, got.Status))
		case w.Measurement == anticipate.Deterministic:
			c.rep.Regraded++
			if d := resultDiff(got, w, true); d != "" {
				differ(link, "re-graded from the events: %s", d)
			}
		default:
			if d := resultDiff(got, w, false); d != "" {
				differ(link, "%s", d)
			}
		}
	}
	if diffs > 0 {
		return false
	}
	score, verdict, failed := anticipate.Tally(final, a.GradingPolicy)
	if score != v.Score {
		differ("verification.score", "is %v, the criteria tally to %v", v.Score, score)
	}
	if verdict != v.Verdict {
		differ("verification.verdict", "is %s, the criteria and the policy give %s", v.Verdict, verdict)
	}
	if !slices.Equal(failed, v.AntiCriteriaFailed) {
		differ("verification.anti_criteria_failed", "is %v, the criteria give %v", v.AntiCriteriaFailed, failed)
	}
	if diffs > 0 {
		return false
	}
	c.rep.Verdict, c.rep.Score = v.Verdict, v.Score
	c.rep.ok("regrade", "%d DETERMINISTIC criteria re-graded from the events; score %v and verdict %s tally again", c.rep.Regraded, v.Score, v.Verdict)
	return true
}

func usesWatcher(a *anticipate.Anticipation, cr anticipate.CategorizedCriterion) bool {
	p := a.Programs()[cr.CriterionID]
	return p != nil && p.UsesWatcher()
}

// resultDiff says how a stated result differs from the recomputed one, or
// "". For DETERMINISTIC criteria everything the grading produces is
// compared; for the others (graded by a judge or a reviewer) the status
// and score their stated grade implies.
func resultDiff(got, want anticipate.Result, deterministic bool) string {
	var d []string
	if got.Status != want.Status {
		d = append(d, fmt.Sprintf("status is %s, want %s", got.Status, want.Status))
	}
	if !sameScore(got.Score, want.Score) {
		d = append(d, fmt.Sprintf("score is %s, want %s", scoreText(got.Score), scoreText(want.Score)))
	}
	if deterministic {
		if got.Evidence != want.Evidence {
			d = append(d, fmt.Sprintf("evidence is %q, want %q", got.Evidence, want.Evidence))
		}
		if got.GradedBy != want.GradedBy {
			d = append(d, fmt.Sprintf("graded_by is %q, want %q", got.GradedBy, want.GradedBy))
		}
		if got.Rationale != "" {
			d = append(d, "a DETERMINISTIC result has a rationale")
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}

func sameScore(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func scoreText(s *float64) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprint(*s)
}

// noWatcher stands for the watcher, whose records a bundle does not hold;
// criteria that read it are taken as signed (see regrade).
type noWatcher struct{}

func (noWatcher) ExpectationState(string) (string, bool) { return "", false }
func (noWatcher) LapseCount(string) int                  { return 0 }

// ParseEvent validates an execution event of a bundle for grading, as
// anticipate.ValidateEvent does, with one allowance: an event stored
// before events were RFC-032 messages names its type in "event_type"
// instead of "message_type". The server still serves and graded it (its
// chain digest covers it as stored), so it is read as if the member were
// message_type. Errors are ValidateEvent's.
func ParseEvent(raw json.RawMessage) (*anticipate.Event, error) {
	ev, err := anticipate.ValidateEvent(raw)
	if err == nil {
		return ev, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, err
	}
	legacy, isLegacy := m[anticipate.LegacyTypeField]
	if _, current := m["message_type"]; !isLegacy || current {
		return nil, err
	}
	m["message_type"] = legacy
	delete(m, anticipate.LegacyTypeField)
	b, merr := json.Marshal(m)
	if merr != nil {
		return nil, err
	}
	ev, lerr := anticipate.ValidateEvent(b)
	if lerr != nil {
		return nil, lerr
	}
	ev.Raw = raw
	return ev, nil
}
