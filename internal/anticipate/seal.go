package anticipate

import (
	"bytes"

	"github.com/agentclock/clockwork/internal/errs"
)

// Identical reports whether two anticipations are the same message: equal
// RFC 8785 canonical forms of their Raw bytes (so white space and key order
// do not matter). Either being nil or not canonicalizable gives false.
func Identical(a, b *Anticipation) bool {
	if a == nil || b == nil {
		return false
	}
	ca, err := Canonical(a.Raw)
	if err != nil {
		return false
	}
	cb, err := Canonical(b.Raw)
	if err != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}

// CheckNew decides whether a new ANTICIPATE may be stored. executionBegun
// reports whether the plan it binds to (a.PlanID) already has a
// TOOL_REQUEST or STEP_COMPLETE. It returns an errs.Conflict error in that
// case, because the anticipation would define success after the fact, and
// nil otherwise. An anticipation without plan_id binds to future plans of
// its scope envelope only, so callers pass false for it.
func CheckNew(a *Anticipation, executionBegun bool) error {
	if a == nil {
		return errs.E(errs.Invalid, "no anticipation")
	}
	if executionBegun {
		return errs.E(errs.Conflict, "execution of plan %q has already begun; an ANTICIPATE declared now would define success after the fact", a.PlanID)
	}
	return nil
}

// CheckUpdate decides what to do when next is submitted for an
// anticipation that is already stored as existing. It returns
// identical=true and nil for an identical re-submission (an idempotent
// retry, sealed or not). Otherwise it returns an errs.Invalid error naming
// anticipation_id when the ids differ, an errs.Conflict error when existing
// is sealed (RFC-032 section 3.5: a sealed ANTICIPATE is immutable), and
// identical=false and nil when the unsealed anticipation may be replaced.
func CheckUpdate(existing, next *Anticipation, sealed bool) (identical bool, err error) {
	if existing == nil || next == nil {
		return false, errs.E(errs.Invalid, "no anticipation")
	}
	if existing.AnticipationID != next.AnticipationID {
		return false, &errs.Error{Code: errs.Invalid, Message: "invalid ANTICIPATE message",
			Fields: []errs.FieldError{{Path: "anticipation_id",
				Message: "is " + quote(next.AnticipationID) + " but the stored anticipation is " + quote(existing.AnticipationID)}}}
	}
	if Identical(existing, next) {
		return true, nil
	}
	if sealed {
		return false, errs.E(errs.Conflict, "anticipation %q is sealed: execution of its plan has begun, and a sealed ANTICIPATE cannot be changed", existing.AnticipationID)
	}
	return false, nil
}

func quote(s string) string { return `"` + s + `"` }
