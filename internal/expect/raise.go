package expect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/agentclock/clockwork/internal/errs"
)

func conflictf(format string, args ...any) error { return errs.E(errs.Conflict, format, args...) }

// Limits on identifiers and texts, so that no request can grow a record
// without bound.
const (
	MaxIDLen   = 256
	MaxTextLen = 4096
)

// RaiseRequest is the body of a raise: the origin task and the
// expectations it raises, all or nothing.
type RaiseRequest struct {
	TaskID       string        `json:"taskId"`
	ContextID    string        `json:"contextId"`
	Skill        string        `json:"skill,omitempty"`
	Expectations []Expectation `json:"expectations"`
	// Internal is set by the watcher when it raises a heartbeat's period
	// or a review item's due time: only those may use the reserved ids
	// (IsReservedID). Clients cannot set it.
	Internal bool `json:"-"`
}

// HeartbeatIDPrefix starts the expectation ids, fact keys and origin task
// ids of heartbeat periods (hb:<name>:<n>), which only the heartbeat
// routes raise, satisfy, refute or withdraw: a period closed another way
// would leave its heartbeat watching nothing.
const HeartbeatIDPrefix = "hb:"

// IsHeartbeatID reports whether id (an expectation id, fact key or task
// id) is reserved for heartbeats.
func IsHeartbeatID(id string) bool { return strings.HasPrefix(id, HeartbeatIDPrefix) }

const heartbeatOnly = "starts with %q, reserved for heartbeats' periods (PUT /v1/agents/{agentId}/heartbeats/{name}; ping, pause or delete the heartbeat instead)"

// ReviewIDPrefix starts the expectation ids, fact keys and origin task ids
// of review items' due times (kind ReviewDueKind), which only the review
// queues raise and satisfy: an agent closing one itself would hide a late
// review.
const ReviewIDPrefix = "review:"

// ReviewDueKind is the kind of a review item's due time.
const ReviewDueKind = "review-due"

const reviewOnly = "starts with %q, reserved for review items' due times (kind review-due), which the review queues keep"

// IsReservedID reports whether id is reserved for the watcher's own
// expectations: heartbeats' periods and review items' due times.
func IsReservedID(id string) bool { return IsHeartbeatID(id) || strings.HasPrefix(id, ReviewIDPrefix) }

// reservedUse adds to c why path may not hold id, and reports whether it
// is reserved.
func reservedUse(c *errs.Collector, path, id string) bool {
	switch {
	case IsHeartbeatID(id):
		c.Add(path, heartbeatOnly, HeartbeatIDPrefix)
	case strings.HasPrefix(id, ReviewIDPrefix):
		c.Add(path, reviewOnly, ReviewIDPrefix)
	default:
		return false
	}
	return true
}

// References returns every expectation id the raise reads: its own ids (to
// detect retries and reuse) and the anchors, after ids and superseded ids
// it names. Callers load these records before calling Raise.
func (req RaiseRequest) References() []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, e := range req.Expectations {
		add(e.ExpectationID)
		if e.Anchor != nil {
			add(e.Anchor.ExpectationID)
		}
		for _, a := range e.After {
			add(a)
		}
		add(e.Supersedes)
	}
	return out
}

// RaiseResult is the outcome of a valid raise.
type RaiseResult struct {
	// Records holds one record per requested expectation, in request order:
	// the new record, or the existing one for an idempotent retry.
	Records []*Record
	// Writes holds the records to persist: new records (to create) and
	// superseded records (withdrawn, to update), in that order.
	Writes []*Record
	// Created marks which entries of Writes are new.
	Created []bool
}

// ValidID checks an identifier: non-empty, bounded, printable.
func ValidID(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxIDLen:
		return fmt.Sprintf("is longer than %d bytes", MaxIDLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

func checkText(c *errs.Collector, path, s string, required bool) {
	switch {
	case required && strings.TrimSpace(s) == "":
		c.Add(path, "is required")
	case len(s) > MaxTextLen:
		c.Add(path, "is longer than %d bytes", MaxTextLen)
	}
}

func checkID(c *errs.Collector, path, s string) {
	if msg := ValidID(s); msg != "" {
		c.Add(path, "%s", msg)
	}
}

// checkInstant validates an RFC 3339 instant within the watcher's sanity
// bounds and returns it in UTC.
func checkInstant(c *errs.Collector, path, s string, now time.Time, cfg Config) (time.Time, bool) {
	if s == "" {
		c.Add(path, "is required (an RFC 3339 instant, e.g. 2026-12-01T09:00:00Z)")
		return time.Time{}, false
	}
	t, err := ParseTime(s)
	if err != nil {
		c.Add(path, "is not an RFC 3339 instant (e.g. 2026-12-01T09:00:00Z)")
		return time.Time{}, false
	}
	if t.Year() < 1970 {
		c.Add(path, "is before 1970")
		return time.Time{}, false
	}
	if t.After(now.Add(cfg.MaxFuture)) {
		c.Add(path, "is more than %d years ahead", int(cfg.MaxFuture.Hours()/24/366))
		return time.Time{}, false
	}
	return t, true
}

func checkDuration(c *errs.Collector, path, s string) {
	if _, err := ParseDuration(s); err != nil {
		c.Add(path, "%s", err.Error())
	}
}

// sameBody reports whether two expectation bodies are identical, compared on
// their canonical JSON encoding.
func sameBody(a, b Expectation) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Raise validates a raise against the agent's card and the existing records
// it references (keyed by expectation id; see References), and returns the
// records to write. It is all or nothing: any invalid expectation makes it
// return an Invalid error naming every failing field and nothing is raised.
// Raising an id that already exists with an identical body is an
// idempotent retry that returns the existing record; with another body it
// is a Conflict, because ids are never reused.
//
// remembered holds, by fact key, the watcher's memories that
// req.LookbackKeys names (nil or absent: nothing remembered): an expectation with a lookback is
// raised already satisfied, or lapsed "refuted", by a fact it recalls,
// and a satisfaction at the raise skips its open predecessors as a fact
// reported then would.
func Raise(card Card, req RaiseRequest, existing map[string]*Record, remembered map[string][]*FactMemory, now time.Time, cfg Config) (RaiseResult, error) {
	var c errs.Collector
	var res RaiseResult
	checkID(&c, "taskId", req.TaskID)
	if !req.Internal {
		reservedUse(&c, "taskId", req.TaskID)
	}
	checkID(&c, "contextId", req.ContextID)
	if req.Skill != "" {
		checkID(&c, "skill", req.Skill)
	}
	switch {
	case len(req.Expectations) == 0:
		c.Add("expectations", "must hold at least one expectation")
	case len(req.Expectations) > cfg.MaxPerRequest:
		c.Add("expectations", "holds more than %d expectations", cfg.MaxPerRequest)
	}
	if err := c.Err("invalid raise request"); err != nil {
		return res, err
	}

	batch := map[string]*Record{} // raised earlier in this request
	lookup := func(id string) *Record {
		if r, ok := batch[id]; ok {
			return r
		}
		return existing[id]
	}
	superseded := map[string]*Record{}
	type skipAtRaise struct {
		rec   *Record
		preds []string
	}
	var skipped []skipAtRaise
	for i, e := range req.Expectations {
		p := fmt.Sprintf("expectations[%d]", i)
		checkID(&c, p+".expectationId", e.ExpectationID)
		if !req.Internal {
			reserved := false
			for _, path := range []string{".expectationId", ".supersedes", ".satisfiedBy.factKey"} {
				id := map[string]string{".expectationId": e.ExpectationID, ".supersedes": e.Supersedes, ".satisfiedBy.factKey": e.SatisfiedBy.FactKey}[path]
				reserved = reservedUse(&c, p+path, id) || reserved
			}
			if e.RefutedBy != nil {
				reserved = reservedUse(&c, p+".refutedBy.factKey", e.RefutedBy.FactKey) || reserved
			}
			for j, id := range e.After {
				reserved = reservedUse(&c, fmt.Sprintf("%s.after[%d]", p, j), id) || reserved
			}
			if reserved {
				continue // named, and never compared with a period (which would tell it exists)
			}
		}
		if _, dup := batch[e.ExpectationID]; dup && e.ExpectationID != "" {
			c.Add(p+".expectationId", "repeats an id raised earlier in this request")
			continue
		}
		if old := existing[e.ExpectationID]; old != nil && e.ExpectationID != "" {
			if !sameBody(old.Expectation, e) {
				return res, conflictf("expectationId %q was already raised with a different body; expectation ids are never reused", e.ExpectationID)
			}
			res.Records = append(res.Records, old)
			batch[e.ExpectationID] = old
			continue
		}
		kind, ok := card.Kind(e.Kind)
		switch {
		case e.Kind == "":
			c.Add(p+".kind", "is required")
		case !ok:
			c.Add(p+".kind", "kind %q is not declared on the agent card", e.Kind)
		case len(kind.Skills) > 0 && !slices.Contains(kind.Skills, req.Skill):
			c.Add("skill", "kind %q may only be raised by tasks of skills %v (got %q)", e.Kind, kind.Skills, req.Skill)
		}
		checkID(&c, p+".subject.type", e.Subject.Type)
		checkID(&c, p+".subject.id", e.Subject.ID)
		checkText(&c, p+".expects", e.Expects, true)
		checkText(&c, p+".basis", e.Basis, true)
		if e.SatisfiedBy.FactKey == "" {
			c.Add(p+".satisfiedBy.factKey", "is required")
		} else if len(e.SatisfiedBy.FactKey) > MaxTextLen {
			c.Add(p+".satisfiedBy.factKey", "is longer than %d bytes", MaxTextLen)
		}
		checkLookback(&c, p+".satisfiedBy.lookback", e.SatisfiedBy.Lookback, cfg)
		if rb := e.RefutedBy; rb != nil {
			switch {
			case rb.FactKey == "":
				c.Add(p+".refutedBy.factKey", "is required")
			case len(rb.FactKey) > MaxTextLen:
				c.Add(p+".refutedBy.factKey", "is longer than %d bytes", MaxTextLen)
			case rb.FactKey == e.SatisfiedBy.FactKey:
				c.Add(p+".refutedBy.factKey", "is the key of satisfiedBy; a fact cannot both satisfy and refute an expectation")
			}
			checkLookback(&c, p+".refutedBy.lookback", rb.Lookback, cfg)
		}
		if w := e.WatchTask; w != nil {
			checkID(&c, p+".watchTask.agentId", w.AgentID)
			checkID(&c, p+".watchTask.taskId", w.TaskID)
		}
		due, dueOK := checkInstant(&c, p+".dueAt", e.DueAt, now, cfg)
		if e.Grace != "" {
			checkDuration(&c, p+".grace", e.Grace)
		}
		if e.Horizon != "" {
			checkInstant(&c, p+".horizon", e.Horizon, now, cfg)
		}
		if e.Anchor != nil {
			ap := p + ".anchor.expectationId"
			switch a := lookup(e.Anchor.ExpectationID); {
			case e.Anchor.ExpectationID == "":
				c.Add(ap, "is required")
			case e.Anchor.ExpectationID == e.ExpectationID:
				c.Add(ap, "an expectation cannot anchor on itself")
			case a == nil:
				c.Add(ap, "names no expectation of this agent (%q)", e.Anchor.ExpectationID)
			}
			checkDuration(&c, p+".anchor.offset", e.Anchor.Offset)
		}
		if len(e.After) > cfg.MaxPerRequest {
			c.Add(p+".after", "names more than %d expectations", cfg.MaxPerRequest)
		}
		for j, id := range e.After {
			ap := fmt.Sprintf("%s.after[%d]", p, j)
			switch a := lookup(id); {
			case id == e.ExpectationID:
				c.Add(ap, "an expectation cannot come after itself")
			case a == nil:
				c.Add(ap, "names no expectation of this agent (%q)", id)
			case a.Expectation.Subject != e.Subject:
				c.Add(ap, "names %q, which is on another subject", id)
			}
		}
		lineage := 0
		if e.Supersedes != "" {
			sp := p + ".supersedes"
			old := lookup(e.Supersedes)
			switch {
			case e.Supersedes == e.ExpectationID:
				c.Add(sp, "an expectation cannot supersede itself")
			case old == nil:
				c.Add(sp, "names no expectation of this agent (%q)", e.Supersedes)
			case old.State != StateOpen || superseded[e.Supersedes] != nil:
				c.Add(sp, "names %q, which is not open (%s)", e.Supersedes, old.State)
			case old.Lineage+1 > cfg.MaxLineage:
				c.Add(sp, "lineage would reach %d, above the bound of %d", old.Lineage+1, cfg.MaxLineage)
			default:
				lineage = old.Lineage + 1
			}
		}
		if len(c.List) > 0 || !dueOK {
			// Keep validating the rest of the batch so every error is named.
			batch[e.ExpectationID] = &Record{Expectation: e}
			continue
		}
		rec := &Record{
			AgentID:        card.AgentID,
			TaskID:         req.TaskID,
			ContextID:      req.ContextID,
			Skill:          req.Skill,
			Expectation:    e,
			ProjectedDueAt: FormatTime(due),
			DueAt:          FormatTime(due),
			State:          StateOpen,
			RaisedAt:       FormatTime(now),
			Lineage:        lineage,
		}
		// An anchor already satisfied fixes the due time at once.
		if e.Anchor != nil {
			if a := lookup(e.Anchor.ExpectationID); a != nil && a.SatisfiedBy != nil {
				if off, err := ParseDuration(e.Anchor.Offset); err == nil {
					rec.DueAt = FormatTime(off.AddTo(mustTime(a.ObservedAt)))
				}
			}
		}
		var eff *Effects
		rec, eff = applyLookback(rec, remembered, now, cfg)
		batch[e.ExpectationID] = rec
		res.Records = append(res.Records, rec)
		res.Writes = append(res.Writes, rec)
		res.Created = append(res.Created, true)
		if eff != nil {
			skipped = append(skipped, skipAtRaise{rec: rec, preds: eff.SkipCheck})
		}
		if e.Supersedes != "" {
			old := lookup(e.Supersedes)
			w, _, _ := Withdraw(old, "superseded by "+e.ExpectationID, now)
			superseded[e.Supersedes] = w
		}
	}
	if err := c.Err("invalid expectations"); err != nil {
		return RaiseResult{}, err
	}
	// A satisfaction at the raise (lookback) skips the open predecessors
	// it names, as the fact would have had the expectation been raised
	// before it.
	for _, s := range skipped {
		for _, pid := range s.preds {
			p := lookup(pid)
			if p == nil || p.State != StateOpen || superseded[pid] != nil || !AnchoredOn(s.rec, p) {
				continue
			}
			np, _ := Skip(p, []string{s.rec.Expectation.ExpectationID}, nil, now)
			res.replace(np, existing[pid] == nil)
			batch[pid] = np
		}
	}
	for _, e := range req.Expectations {
		if w := superseded[e.Supersedes]; w != nil && e.Supersedes != "" {
			if _, inBatch := batch[e.Supersedes]; inBatch && existing[e.Supersedes] == nil {
				// Superseding an expectation raised in this same request: write
				// it once, already withdrawn.
				for i, r := range res.Writes {
					if r.Expectation.ExpectationID == e.Supersedes {
						res.Writes[i] = w
					}
				}
				for i, r := range res.Records {
					if r.Expectation.ExpectationID == e.Supersedes {
						res.Records[i] = w
					}
				}
				continue
			}
			res.Writes = append(res.Writes, w)
			res.Created = append(res.Created, false)
			delete(superseded, e.Supersedes)
		}
	}
	return res, nil
}

// replace puts r in place of the record with its id in Records and
// Writes, adding it to Writes when it is not there (an existing record).
func (res *RaiseResult) replace(r *Record, inBatch bool) {
	id := r.Expectation.ExpectationID
	for i, x := range res.Records {
		if x.Expectation.ExpectationID == id {
			res.Records[i] = r
		}
	}
	for i, x := range res.Writes {
		if x.Expectation.ExpectationID == id {
			res.Writes[i] = r
			return
		}
	}
	res.Writes = append(res.Writes, r)
	res.Created = append(res.Created, inBatch)
}

// ValidateFact checks a reported fact. Source is ignored (the watcher sets
// it); the path prefix names the fact in the request.
func ValidateFact(c *errs.Collector, path string, f Fact, now time.Time, cfg Config) {
	validateFact(c, path, f, now, cfg, false)
}

// ValidateInternalFact is ValidateFact for a fact the watcher reports
// itself (a review item's last review), which may use a review key.
func ValidateInternalFact(c *errs.Collector, path string, f Fact, now time.Time, cfg Config) {
	validateFact(c, path, f, now, cfg, true)
}

func validateFact(c *errs.Collector, path string, f Fact, now time.Time, cfg Config, reservedOK bool) {
	if f.FactKey == "" {
		c.Add(path+".factKey", "is required")
	} else if IsHeartbeatID(f.FactKey) {
		c.Add(path+".factKey", heartbeatOnly+"; a heartbeat's fact is its ping", HeartbeatIDPrefix)
	} else if IsReservedID(f.FactKey) && !reservedOK {
		c.Add(path+".factKey", reviewOnly+"; an item's fact is its last review", ReviewIDPrefix)
	} else if len(f.FactKey) > MaxTextLen {
		c.Add(path+".factKey", "is longer than %d bytes", MaxTextLen)
	}
	if f.ObservedAt == "" {
		c.Add(path+".observedAt", "is required (an RFC 3339 instant)")
	} else if t, err := ParseTime(f.ObservedAt); err != nil {
		c.Add(path+".observedAt", "is not an RFC 3339 instant (e.g. 2026-12-01T09:00:00Z)")
	} else if t.After(now.Add(cfg.MaxFactSkew)) {
		c.Add(path+".observedAt", "is more than %s ahead of the watcher's clock", cfg.MaxFactSkew)
	} else if t.Year() < 1970 {
		c.Add(path+".observedAt", "is before 1970")
	}
	if f.Subject != nil {
		checkID(c, path+".subject.type", f.Subject.Type)
		checkID(c, path+".subject.id", f.Subject.ID)
	}
}
