package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store"
)

// Model grading is not part of VERIFY. VERIFY (run from the change feed,
// on AWS inside the stream's batch) stores the VERIFY at once with its
// HEURISTIC criteria PENDING and a JudgeAttempts per criterion on the
// record; each criterion is then graded as its own unit of work
// (GradeCriterion), carried by a queue that has its own retries (on AWS an
// SQS queue and the grader function; embedded, GradingWorker). A judge
// that is slow, hangs or fails therefore never holds the feed, and a
// criterion it fails is tried again later, not lost: its state is on the
// record, and the record is in a sparse index (ListGrading) while any
// criterion waits, so a job whose message was lost is found again.

// JudgeAttempts is the grading state of one HEURISTIC criterion waiting
// for the model judge.
type JudgeAttempts struct {
	// Attempts counts the judge calls that failed.
	Attempts int `json:"attempts"`
	// NextAt is when the next attempt is due (RFC 3339).
	NextAt string `json:"next_at"`
	// LastError says why the last attempt failed.
	LastError string `json:"last_error,omitempty"`
	// FailingSince is when the first attempt failed (RFC 3339): the waits
	// grow with the time spent failing (retry.Policy), so a judge that is
	// back after an outage of length T is tried again within T.
	FailingSince string `json:"failing_since,omitempty"`
}

// gradingClaimKey is the key of the claim on one attempt at a criterion
// (store.Claim), in its VERIFY's partition; a claim is a small item of its
// own rather than a field of the VERIFY, so that the criteria of one
// VERIFY graded at once do not contend for the VERIFY to claim.
func gradingClaimKey(job GradeJob, attempts int) store.Key {
	return store.Key{PK: verificationKey(job.VerificationID).PK, SK: fmt.Sprintf("GC#%s#%d", esc(job.CriterionID), attempts)}
}

// GradeJob names one criterion of one VERIFY to grade, and when.
type GradeJob struct {
	VerificationID string    `json:"verificationId"`
	CriterionID    string    `json:"criterionId"`
	At             time.Time `json:"at"`
}

// Grader is the port of the grading queue: Enqueue arranges for
// GradeCriterion to run for the job at or after job.At. Enqueuing a job
// twice is allowed (the second run finds the criterion graded and does
// nothing); an error means the job was not taken.
type Grader interface {
	Enqueue(ctx context.Context, jobs []GradeJob) error
}

// JudgeRetry bounds the attempts at one criterion.
type JudgeRetry struct {
	// Attempts is the most judge calls one criterion gets (default 20).
	Attempts int
	// Base and Max bound the waits between attempts (defaults 5 s and
	// 15 min): each wait is drawn below the time spent failing so far
	// (retry.Policy), at least Base, at most Max, so a judge back after an
	// outage of length T is tried again within about T. The defaults
	// span about an hour of outage; a criterion is given up after a day
	// whatever its count.
	Base, Max time.Duration
	// CallTimeout bounds one judge call (default 60 s; the judge clients
	// time out at 30 s themselves).
	CallTimeout time.Duration
}

func (r JudgeRetry) withDefaults() JudgeRetry {
	if r.Attempts <= 0 {
		r.Attempts = 20
	}
	if r.Base <= 0 {
		r.Base = 5 * time.Second
	}
	if r.Max <= 0 {
		r.Max = 15 * time.Minute
	}
	if r.CallTimeout <= 0 {
		r.CallTimeout = time.Minute
	}
	return r
}

// policy is the retry policy of judge calls.
func (r JudgeRetry) policy() retry.Policy {
	return retry.Policy{For: 24 * time.Hour, Base: r.Base, Ceiling: r.Max, MaxAttempts: r.Attempts}
}

// afterFailure decides what a failed judge call does to a criterion's
// grading state: another attempt later (next), or none (a reason to leave
// the criterion pending with). An answer that cannot be a grade is not
// retried; anything else is, until the attempts run out.
// key names the criterion in the waits' jitter.
func afterFailure(key string, st JudgeAttempts, err error, now time.Time, r JudgeRetry) (next *JudgeAttempts, reason string) {
	msg := clipReason(err.Error())
	if errors.Is(err, anticipate.ErrNotAGrade) {
		return nil, msg
	}
	st.Attempts++
	since := now
	if t, perr := expect.ParseTime(st.FailingSince); perr == nil && st.FailingSince != "" {
		since = t
	}
	d := r.policy().AfterFailure(key, st.Attempts, since, now, retry.Failure{Class: retry.Unknown})
	if d.Dead {
		return nil, fmt.Sprintf("the model judge failed %d attempts; the last: %s", st.Attempts, msg)
	}
	st.LastError = msg
	st.FailingSince = expect.FormatTime(since)
	st.NextAt = expect.FormatTime(d.Next)
	return &st, ""
}

func clipReason(s string) string {
	const max = 512
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// gradingShards spreads the waiting VERIFYs over this many index
// partitions (a DynamoDB partition takes about 1,000 writes a second).
const gradingShards = 8

func gradingPK(shard int) string { return fmt.Sprintf("GRADING#%d", shard) }

func gradingShard(vid string) int {
	h := fnv.New32a()
	h.Write([]byte(vid))
	return int(h.Sum32() % gradingShards)
}

// verificationIndex is the index keys of a VERIFY record: by anticipation
// always, and in the grading index while a criterion waits for the judge
// (sorted by its earliest next attempt).
func verificationIndex(vr *VerificationRecord) map[store.IndexName]store.IndexKey {
	v := vr.Verification
	idx := map[store.IndexName]store.IndexKey{store.GSI1: {PK: byAnticipationPK(v.AnticipationID), SK: esc(v.VerificationID)}}
	if sb := vr.Sampled; sb != nil {
		// Listed by its evaluator, erased with its agent.
		idx[store.GSI1] = store.IndexKey{PK: evaluatorVerificationsPK(v.AgentID, sb.Evaluator), SK: esc(v.VerificationID)}
		idx[store.GSI2] = store.IndexKey{PK: sampledOfPK(v.AgentID), SK: esc(v.VerificationID)}
	}
	if next, ok := earliest(vr.Judging); ok {
		idx[store.GSI5] = store.IndexKey{PK: gradingPK(gradingShard(v.VerificationID)), SK: sortTime(next) + "#" + esc(v.VerificationID)}
	}
	return idx
}

// sortTime renders t so that the strings sort as the times do.
func sortTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

func earliest(j map[string]*JudgeAttempts) (time.Time, bool) {
	var out time.Time
	found := false
	for _, a := range j {
		at, _ := expect.ParseTime(a.NextAt)
		if !found || at.Before(out) {
			out, found = at, true
		}
	}
	return out, found
}

// jobsOf returns the grading jobs of a record.
func jobsOf(vr *VerificationRecord) []GradeJob {
	var out []GradeJob
	for _, c := range vr.Verification.Results {
		a, ok := vr.Judging[c.CriterionID]
		if !ok {
			continue
		}
		at, _ := expect.ParseTime(a.NextAt)
		out = append(out, GradeJob{VerificationID: vr.Verification.VerificationID, CriterionID: c.CriterionID, At: at})
	}
	return out
}

// GradeCriterion makes one attempt at grading a criterion with the model
// judge and records the outcome on the VERIFY: a grade (a new VERIFY
// version, signed, as a submitted grade makes), a later attempt (its time
// is returned as retryAt, for the caller to enqueue), or, once the
// judge's answer cannot be a grade or the attempts have run out, the
// criterion left PENDING with the reason. A job for a criterion no longer
// waiting (graded since, by a person or an earlier run of the same job)
// or for an unknown VERIFY does nothing. A job that comes before its time
// does nothing either and returns that time. The judge is called only
// after the attempt is claimed (claimAttempt), so duplicate deliveries
// make one judge call between them, not one each: a delivery that finds
// the attempt claimed does nothing and returns zero, the holder carrying
// the job on. Errors are the store's (the job must be retried); a judge's
// failure is state, not an error.
func (s *Service) GradeCriterion(ctx context.Context, job GradeJob) (retryAt time.Time, err error) {
	vr, err := s.readVerification(ctx, job.VerificationID)
	if err != nil || vr == nil {
		return time.Time{}, err
	}
	st, ok := vr.Judging[job.CriterionID]
	if !ok {
		return time.Time{}, nil
	}
	if at, _ := expect.ParseTime(st.NextAt); at.After(s.now()) {
		return at, nil
	}
	v := vr.Verification
	rec, a, ok, err := s.gradedAgainst(ctx, nil, vr)
	if err != nil {
		return time.Time{}, wrap(err)
	}
	if !ok {
		return time.Time{}, wrap(noAnticipation(v.AnticipationID))
	}
	ex, err := s.Execution(ctx, v.AgentID, v.PlanID)
	if err != nil {
		return time.Time{}, err
	}
	agg, err := s.aggregate(ctx, ex)
	if err != nil {
		return time.Time{}, err
	}
	var req *anticipate.JudgeRequest
	for _, jr := range anticipate.JudgeRequests(v, a, agg.Env(nil)) {
		if jr.CriterionID == job.CriterionID {
			req = &jr
		}
	}
	var resp *anticipate.JudgeResponse
	var judgeErr error
	switch {
	case req == nil:
		// No longer pending (the verdict is final, or a grade arrived):
		// only the waiting state is left to clear.
	case s.judge == nil:
		judgeErr = fmt.Errorf("%w: no model judge is configured", anticipate.ErrNotAGrade)
	default:
		held, err := s.claimAttempt(ctx, job, *st)
		if err != nil || !held {
			return time.Time{}, wrap(err)
		}
		cctx, cancel := context.WithTimeout(ctx, s.retry.CallTimeout)
		resp, judgeErr = s.judge.Judge(cctx, *req)
		cancel()
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err() // our deadline, not the judge's failure
		}
	}
	// The outcome is recorded against the state read before the call: a
	// duplicate delivery of the same attempt that recorded first wins, and
	// this one changes nothing (no second count of one failure).
	seen := *st
	var out gradeOutcome
	switch {
	case req == nil:
	case judgeErr != nil:
		out.next, out.reason = afterFailure(job.VerificationID+"/"+job.CriterionID, seen, judgeErr, s.now(), s.retry)
	default:
		out.resp = resp
	}
	// A VERIFY at the store's item limit cannot take the grade (its
	// rationale): the criterion is then left pending with a short reason,
	// and if even that does not fit, it only stops waiting. Either way the
	// job ends; a record that can never be written must not keep a job
	// (and its judge calls) coming back.
	for _, mode := range []outcomeMode{recordOutcome, reasonOnly, dropOnly} {
		retryAt, err = s.recordOutcome(ctx, job, seen, a.GradingPolicy, out, mode)
		if !errors.Is(err, store.ErrTooLarge) {
			break
		}
	}
	if err != nil {
		return time.Time{}, wrap(err)
	}
	if out.resp != nil {
		// A calibrated criterion's sample goes to people too.
		if err := s.openCalibration(ctx, rec, a, job.VerificationID, job.CriterionID); err != nil {
			return time.Time{}, err
		}
	}
	return retryAt, nil
}

// claimAttempt claims the attempt seen at job's criterion for the judge
// call and the recording of its outcome (store.Claim), and reports
// whether this run holds it and the VERIFY, read again after the claim,
// still waits in that state: of several deliveries of one job, one calls
// the judge, and one that read the VERIFY before another's attempt was
// recorded does not call it again. A holder that dies frees the attempt
// when its claim expires.
func (s *Service) claimAttempt(ctx context.Context, job GradeJob, seen JudgeAttempts) (bool, error) {
	held, err := store.Claim(ctx, s.store, gradingClaimKey(job, seen.Attempts), s.retry.CallTimeout+store.ClaimMargin)
	if err != nil || !held {
		return false, err
	}
	vr, err := s.readVerification(ctx, job.VerificationID)
	if err != nil || vr == nil {
		return false, err
	}
	st, ok := vr.Judging[job.CriterionID]
	return ok && st.Attempts == seen.Attempts, nil
}

// gradeOutcome is what one judge call came to: a grade (resp), another
// attempt later (next), the criterion left pending (reason), or, all
// empty, nothing to grade any more.
type gradeOutcome struct {
	resp   *anticipate.JudgeResponse
	next   *JudgeAttempts
	reason string
}

type outcomeMode int

const (
	recordOutcome outcomeMode = iota // as it came
	reasonOnly                       // a grade too large for the record: pending, with a short reason
	dropOnly                         // not even that fits: the criterion stops waiting
)

// recordOutcome writes the outcome of one attempt at a criterion onto its
// VERIFY, when the criterion still waits in the state seen before the
// attempt; it returns when the next attempt is due (zero: none).
func (s *Service) recordOutcome(ctx context.Context, job GradeJob, seen JudgeAttempts, policy anticipate.GradingPolicy, out gradeOutcome, mode outcomeMode) (time.Time, error) {
	var retryAt time.Time
	err := s.updateVerification(ctx, job.VerificationID, func(cur *VerificationRecord) (bool, error) {
		retryAt = time.Time{}
		// The attempt is named by its count: the repair moving its next
		// attempt (NextAt) meanwhile does not make this answer stale.
		st, ok := cur.Judging[job.CriterionID]
		if !ok || st.Attempts != seen.Attempts {
			return false, nil // graded, given up or retried by another delivery meanwhile
		}
		delete(cur.Judging, job.CriterionID)
		changed, reason := false, out.reason
		switch {
		case cur.Verification.Verdict.Final():
			// Final meanwhile (a failed anti criterion, a person's
			// grades): the signed VERIFY stays as it is.
			reason = ""
		case mode == dropOnly:
			reason = ""
		case mode == reasonOnly:
			reason = "the judge's grade does not fit in the VERIFY (its record is at the store's size limit)"
		case out.next != nil:
			cur.Judging[job.CriterionID] = out.next
			retryAt, _ = expect.ParseTime(out.next.NextAt)
		case out.resp != nil:
			gradedBy := out.resp.GradedBy
			if gradedBy == "" {
				gradedBy = "model:judge"
			}
			nv, err := anticipate.ApplyCriterionGrade(cur.Verification, policy, job.CriterionID,
				anticipate.CriterionGrade{Score: out.resp.Score, Rationale: out.resp.Rationale, GradedBy: gradedBy, PromptDigest: out.resp.PromptDigest}, s.now())
			switch {
			case errs.Is(err, errs.Invalid):
				// A grade the domain refuses (a graded_by past its bound)
				// is an answer that cannot be a grade.
				reason = "the judge's grade was refused: " + err.Error()
			case errs.Is(err, errs.Conflict):
				// Graded meanwhile (a person's grade).
			case err != nil:
				return false, err
			default:
				cur.Verification = nv
				changed = true
			}
		}
		if reason != "" {
			if cur.JudgeErrors == nil {
				cur.JudgeErrors = map[string]string{}
			}
			cur.JudgeErrors[job.CriterionID] = reason
			annotatePending(&cur.Verification, map[string]string{job.CriterionID: reason})
			changed = true
		}
		if changed {
			// The VERIFY as returned changed: a new version, sealed.
			cur.Verification.Timestamp = expect.FormatTime(s.now())
			if err := s.seal(&cur.Verification); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	return retryAt, err
}

// updateVerification is the read-modify-write of one VERIFY record: fn
// changes the record read and says whether to write it back (with its
// index keys, which follow what waits for the judge). An unknown VERIFY
// changes nothing. Errors are fn's and the store's.
func (s *Service) updateVerification(ctx context.Context, vid string, fn func(cur *VerificationRecord) (bool, error)) error {
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, verificationKey(vid))
		if err != nil || !ok {
			return err
		}
		cur, err := decode[VerificationRecord](it)
		if err != nil {
			return err
		}
		write, err := fn(cur)
		if err != nil || !write {
			return err
		}
		item, err := verificationItem(vid, cur)
		if err != nil {
			return err
		}
		tx.Put(item)
		return s.markVerification(tx, it, item)
	})
}

// PostponeGrading moves a job whose handling failed (not the judge: the
// store, the record) to after wait, so that it neither keeps the head of
// the grading index nor comes back at once. It changes nothing when the
// criterion no longer waits.
func (s *Service) PostponeGrading(ctx context.Context, job GradeJob, wait time.Duration) error {
	err := s.updateVerification(ctx, job.VerificationID, func(cur *VerificationRecord) (bool, error) {
		st, ok := cur.Judging[job.CriterionID]
		if !ok {
			return false, nil
		}
		st.NextAt = expect.FormatTime(s.now().Add(wait))
		return true, nil
	})
	return wrap(err)
}

// readVerification reads a VERIFY record, or nil when there is none.
func (s *Service) readVerification(ctx context.Context, vid string) (*VerificationRecord, error) {
	it, err := s.store.Get(ctx, verificationKey(vid))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(err)
	}
	return decode[VerificationRecord](it)
}

// ListGrading returns the grading jobs due at or before upTo, at most
// limit (across the index's shards, earliest first within each). The
// index is a global one, so a job may show late, never wrongly: the job
// itself re-reads the record. It is how a grading worker finds its work
// and how a sweep finds jobs whose message was lost.
func (s *Service) ListGrading(ctx context.Context, upTo time.Time, limit int) ([]GradeJob, error) {
	var out []GradeJob
	bound := sortTime(upTo) + "#\uffff"
	for shard := 0; shard < gradingShards && len(out) < limit; shard++ {
		q := store.Query{Index: store.GSI5, PK: gradingPK(shard), SKUpTo: bound, Limit: min(limit-len(out), store.MaxLimit)}
		p, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, wrap(err)
		}
		for _, it := range p.Items {
			vr, err := decode[VerificationRecord](it)
			if err != nil {
				return nil, wrap(err)
			}
			for _, j := range jobsOf(vr) {
				if !j.At.After(upTo) {
					out = append(out, j)
				}
			}
		}
	}
	return out, nil
}

// NextGrading returns the earliest time any criterion waits for (zero
// when none does).
func (s *Service) NextGrading(ctx context.Context) (time.Time, error) {
	var next time.Time
	for shard := 0; shard < gradingShards; shard++ {
		p, err := s.store.Query(ctx, store.Query{Index: store.GSI5, PK: gradingPK(shard), Limit: 1})
		if err != nil {
			return time.Time{}, wrap(err)
		}
		for _, it := range p.Items {
			sk := it.Index[store.GSI5].SK
			at, err := time.Parse(time.RFC3339Nano, sk[:max(0, strings.IndexByte(sk, '#'))])
			if err == nil && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	return next, nil
}

// RepairGrading re-enqueues the jobs that have waited past their time by
// more than late: their message was lost, dead-lettered, or is stuck
// behind a backlog. Each one's next attempt is moved to now first, so a
// job re-enqueued is not re-enqueued again before it is late again. It
// returns how many it re-enqueued.
func (s *Service) RepairGrading(ctx context.Context, g Grader, late time.Duration, limit int) (int, error) {
	jobs, err := s.ListGrading(ctx, s.now().Add(-late), limit)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	now := s.now()
	var moved []GradeJob
	for _, j := range jobs {
		skip := false
		err := s.updateVerification(ctx, j.VerificationID, func(cur *VerificationRecord) (bool, error) {
			st, ok := cur.Judging[j.CriterionID]
			if skip = !ok || st.NextAt != expect.FormatTime(j.At); skip {
				return false, nil
			}
			st.NextAt = expect.FormatTime(now)
			return true, nil
		})
		if err != nil {
			return len(moved), wrap(err)
		}
		if skip {
			continue
		}
		moved = append(moved, GradeJob{VerificationID: j.VerificationID, CriterionID: j.CriterionID, At: now})
	}
	if len(moved) == 0 {
		return 0, nil
	}
	return len(moved), g.Enqueue(ctx, moved)
}

// MarshalGradeJob and UnmarshalGradeJob are a job's queue message.
func MarshalGradeJob(j GradeJob) (string, error) {
	b, err := json.Marshal(j)
	return string(b), err
}

// UnmarshalGradeJob decodes a queue message; an error names what is
// wrong (such a message can never succeed).
func UnmarshalGradeJob(body string) (GradeJob, error) {
	var j GradeJob
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		return j, fmt.Errorf("grading job: %w", err)
	}
	if j.VerificationID == "" || j.CriterionID == "" {
		return j, errors.New("grading job without verificationId or criterionId")
	}
	return j, nil
}
