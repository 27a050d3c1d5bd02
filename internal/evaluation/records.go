package evaluation

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store"
)

// The single-table layout of the evaluation loop (the same table as the
// watcher's; key prefixes never collide):
//
//	item            PK               SK                 index PK / SK
//	anticipation    ANT#<agent>#<id> ANT                lk1: PA#<plan> or SA#<scope> / <agent>#<id>
//	                                                    lk2: AX#<id> / <agent>
//	                                                    lk3: SS#<agent>#<session> / <agent>#<id> (with a plan)
//	execution       PLAN#<agent>#<plan> EXEC            lk1: PX#<plan> / <agent>
//	event           PLAN#<agent>#<plan> EV#<seq, 12 digits>
//	                                                    gsi2: EA#<agent> / <plan> (erasure's listing)
//	event id        PLAN#<agent>#<plan> EID#<event_id>
//	                                                    gsi5: AA#<agent> / <received_at>#<id> (listing)
//	verification    VER#<vid>        VER                gsi1: AV#<anticipation> / <vid>
//
// The anticipations bound to a plan or scope are a lookup index (lk1: its
// entries are written in the same commit as the anticipation and read
// consistently), because sealing depends on finding every one of them;
// verifications by anticipation are a global index (a listing).
//
// Plan ids are namespaced by the agent that owns the execution: two agents
// may each run a plan "p-1", and neither's declarations, events or VERIFYs
// reach the other's. The executions of one plan id are a lookup index
// (PX#<plan>), so that a caller acting for several agents finds which of
// its agents runs the plan. Executions stored before plans were namespaced
// live under PLAN#<plan> (legacyExecutionPK); they are read, appended to
// and verified where they are, for the agent they name. Anticipation ids
// are namespaced the same way (ANT#<agent>#<id>, with an AX#<id> lookup;
// those stored before under ANT#<id>, legacyAnticipationKey), so another
// agent's declaration of an id neither blocks nor reveals this agent's.
const (
	TypeAnticipation = "anticipation"
	TypeExecution    = "execution"
	TypeEvent        = "event"
	TypeEventID      = "eventid"
	TypeVerification = "verification"
	// TypeAggregateChunk is a spilled part of an execution's aggregate
	// (anticipate.Chunk): the execution item holds at most
	// anticipate.ChunkBytes of its growing part.
	TypeAggregateChunk = "aggchunk"
)

// lookupBound is the lookup index of anticipations by plan or scope.
const lookupBound = store.LK1

// lookupAnticipationIDs is the lookup index of anticipations by id, whose
// entries name the agent (partitions AX#<id>).
const lookupAnticipationIDs = store.LK2

// lookupSessions is the lookup index of an agent's plan-bound
// anticipations by session_id (partitions SS#<agent>#<session>), read to
// bind OTLP spans by their conversation id; a lookup, so a span exported
// right after its ANTICIPATE was declared finds it.
const lookupSessions = store.LK3

// lookupPlans is the lookup index of executions by plan id (partitions
// PX#<plan>, apart from lookupBound's PA# and SA#).
const lookupPlans = store.LK1

// TypeBindGuard is the type of a binding guard: one item per plan or scope
// that anticipations are bound to, in the partition of their lookup
// entries. Every declaration binding to the plan or scope writes it, and
// the first event of a plan requires it unchanged (Tx.Check) for each
// partition it looked up, so a declaration that commits while the event
// decides which anticipations to seal makes the event run again and seal
// it too. (A lookup sees every commit before it; the guard covers the one
// that lands during it.)
const TypeBindGuard = "bindguard"

func bindGuardKey(boundPK string) store.Key { return store.Key{PK: boundPK, SK: "#GUARD"} }

// esc is store.KeyPart, short for the key builders below.
func esc(s string) string { return store.KeyPart(s) }

func anticipationKey(agent, id string) store.Key {
	return store.Key{PK: "ANT#" + esc(agent) + "#" + esc(id), SK: "ANT"}
}
func legacyAnticipationKey(id string) store.Key { return store.Key{PK: "ANT#" + esc(id), SK: "ANT"} }
func anticipationIDsPK(id string) string        { return "AX#" + esc(id) }
func executionPK(agent, plan string) string     { return "PLAN#" + esc(agent) + "#" + esc(plan) }
func legacyExecutionPK(plan string) string      { return "PLAN#" + esc(plan) }
func executionKey(pk string) store.Key          { return store.Key{PK: pk, SK: "EXEC"} }
func eventKey(pk string, seq int) store.Key {
	return store.Key{PK: pk, SK: fmt.Sprintf("EV#%012d", seq)}
}
func eventIDKey(pk, id string) store.Key { return store.Key{PK: pk, SK: "EID#" + esc(id)} }

// chunkKey is the key of the n-th spilled chunk of an execution's
// aggregate (from 1, in the order they were spilled).
func chunkKey(pk string, n int) store.Key {
	return store.Key{PK: pk, SK: fmt.Sprintf("AGC#%08d", n)}
}
func plansPK(plan string) string          { return "PX#" + esc(plan) }
func verificationKey(id string) store.Key { return store.Key{PK: "VER#" + esc(id), SK: "VER"} }
func planBoundPK(plan string) string      { return "PA#" + esc(plan) }
func sessionPK(agent, session string) string {
	return "SS#" + esc(agent) + "#" + esc(session)
}
func scopeBoundPK(scope string) string  { return "SA#" + esc(scope) }
func byAnticipationPK(id string) string { return "AV#" + esc(id) }
func byAgentPK(agent string) string     { return "AA#" + esc(agent) }

// executionsOfPK is the gsi2 partition listing an agent's executions (by
// plan or by scope envelope), which erasure reads.
func executionsOfPK(agent string) string { return "EA#" + esc(agent) }

// AnticipationRecord is a stored ANTICIPATE with its sealing state.
type AnticipationRecord struct {
	Anticipation json.RawMessage `json:"anticipation"`
	Digest       string          `json:"digest"`
	Sealed       bool            `json:"sealed"`
	SealedAt     string          `json:"sealed_at,omitempty"`
	// SealedBy names the plan whose first event sealed it.
	SealedBy     string `json:"sealed_by,omitempty"`
	Emitter      string `json:"emitter"`
	DeclaredBy   string `json:"declared_by"`
	ReceivedAt   string `json:"received_at"`
	AgentID      string `json:"agent_id"`
	PlanID       string `json:"plan_id,omitempty"`
	ScopeID      string `json:"scope_envelope_id"`
	AnticipateID string `json:"anticipation_id"`
	// SessionID is the ANTICIPATE's session_id: OTLP spans that name it
	// as gen_ai.conversation.id bind to this plan (PlansOfSession).
	SessionID string `json:"session_id,omitempty"`
	// ExpiresAt is when the record is deleted: -retain-evidence after the
	// last completion of a plan it binds; none while no plan it binds has
	// completed, or one has begun since (retention.go).
	ExpiresAt string `json:"expires_at,omitempty"`
	// Running counts the plans it binds that have begun and not completed.
	Running int `json:"running,omitempty"`

	// key is where the record was read from (anticipationKey, or
	// legacyAnticipationKey for one stored before ids were namespaced);
	// zero for a new record.
	key store.Key
}

// storeKey is the key the record is written under.
func (r *AnticipationRecord) storeKey() store.Key {
	if r.key != (store.Key{}) {
		return r.key
	}
	return anticipationKey(r.AgentID, r.AnticipateID)
}

// decodeAnticipation decodes a stored anticipation, remembering its key.
func decodeAnticipation(it store.Item) (*AnticipationRecord, error) {
	rec, err := decode[AnticipationRecord](it)
	if err != nil {
		return nil, err
	}
	rec.key = it.Key
	return rec, nil
}

// Execution is the per-plan state: whether it began (sealing its bound
// anticipations), the head of its digest chain, and whether it completed.
type Execution struct {
	PlanID string `json:"plan_id"`
	// AgentID owns the execution: only its declarations bind to it, and
	// only callers acting for it read or append to it. Empty on executions
	// stored before plans were namespaced (Agents names their agent).
	AgentID     string   `json:"agent_id,omitempty"`
	ScopeID     string   `json:"scope_envelope_id,omitempty"`
	Begun       bool     `json:"begun"`
	BegunAt     string   `json:"begun_at,omitempty"`
	Bound       []string `json:"bound,omitempty"`
	Agents      []string `json:"agents,omitempty"`
	Head        string   `json:"head"`
	Count       int      `json:"count"`
	Completed   bool     `json:"completed"`
	CompletedAt string   `json:"completed_at,omitempty"`
	// Unbound marks a plan taken without an ANTICIPATE, for the agent's
	// online evaluators: no ANTICIPATE binds it later (one declared after
	// its first events could name an outcome already seen).
	Unbound bool `json:"unbound,omitempty"`
	// ExpiresAt is when the execution, its events and its VERIFYs are
	// deleted: -retain-evidence after PLAN_COMPLETE (retention.go).
	ExpiresAt string `json:"expires_at,omitempty"`
	// Aggregate folds the events as they are stored (same commit), so
	// VERIFY reads one item however long the execution was.
	Aggregate anticipate.Aggregate `json:"aggregate"`

	// pk is the partition the execution was read from (executionPK, or
	// legacyExecutionPK for an execution stored before namespacing);
	// version the store version it was read at (0: new).
	pk      string
	version int64
}

// Owner is the agent that owns the execution.
func (e *Execution) Owner() string {
	if e.AgentID != "" || len(e.Agents) == 0 {
		return e.AgentID
	}
	return e.Agents[0]
}

func executionItem(ex *Execution) (store.Item, error) {
	var idx map[store.IndexName]store.IndexKey
	if ex.pk != legacyExecutionPK(ex.PlanID) {
		idx = map[store.IndexName]store.IndexKey{lookupPlans: {PK: plansPK(ex.PlanID), SK: esc(ex.AgentID)},
			store.GSI2: {PK: executionsOfPK(ex.AgentID), SK: esc(ex.PlanID)}}
	}
	return expiring(mkItem(executionKey(ex.pk), TypeExecution, ex, idx))(ex.ExpiresAt)
}

// StoredEvent is one event of a plan's chain. Event is the event exactly
// as received, fields the server does not interpret included.
type StoredEvent struct {
	Seq     int             `json:"seq"`
	EventID string          `json:"event_id"`
	Type    string          `json:"message_type"`
	Event   json.RawMessage `json:"event"`
	Prev    string          `json:"prev"`
	Digest  string          `json:"digest"`
}

// UnmarshalJSON decodes a stored event, also one stored before events were
// RFC-032 messages, whose type was kept under "event_type".
func (e *StoredEvent) UnmarshalJSON(b []byte) error {
	type fields StoredEvent // without this method
	var v struct {
		fields
		LegacyType string `json:"event_type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = StoredEvent(v.fields)
	if e.Type == "" {
		e.Type = v.LegacyType
	}
	return nil
}

type eventIDRecord struct {
	Seq       int    `json:"seq"`
	Digest    string `json:"digest"`
	Canonical string `json:"canonical_sha256"`
}

// VerificationRecord is a stored VERIFY with the grades submitted to it.
type VerificationRecord struct {
	Verification anticipate.Verification `json:"verification"`
	// JudgeErrors explains why HEURISTIC criteria are still pending.
	JudgeErrors map[string]string `json:"judge_errors,omitempty"`
	// Judging holds the HEURISTIC criteria waiting for the model judge
	// (see GradeCriterion).
	Judging map[string]*JudgeAttempts `json:"judging,omitempty"`
	// ExpiresAt is its execution's (retention.go).
	ExpiresAt string `json:"expires_at,omitempty"`
	// Sampled is set on the VERIFY of an online evaluator (evaluators.go).
	Sampled *SampledBy `json:"sampled,omitempty"`
}

// verificationItem maps a VERIFY record onto its item.
func verificationItem(vid string, vr *VerificationRecord) (store.Item, error) {
	return expiring(mkItem(verificationKey(vid), TypeVerification, vr, verificationIndex(vr)))(vr.ExpiresAt)
}

func mkItem(key store.Key, typ string, v any, idx map[store.IndexName]store.IndexKey) (store.Item, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: key, Type: typ, Data: b, Index: idx}, nil
}

func anticipationItem(r *AnticipationRecord) (store.Item, error) {
	key := r.storeKey()
	legacy := key == legacyAnticipationKey(r.AnticipateID)
	// A lookup key names one item: two agents' declarations of one id on
	// one plan or scope need two entries, so the agent is part of it (but
	// for records stored before ids were per agent, whose entries stay).
	boundSK := esc(r.AgentID) + "#" + esc(r.AnticipateID)
	if legacy {
		boundSK = esc(r.AnticipateID)
	}
	idx := map[store.IndexName]store.IndexKey{}
	if r.PlanID != "" {
		idx[lookupBound] = store.IndexKey{PK: planBoundPK(r.PlanID), SK: boundSK}
	} else {
		idx[lookupBound] = store.IndexKey{PK: scopeBoundPK(r.ScopeID), SK: boundSK}
	}
	idx[store.GSI5] = store.IndexKey{PK: byAgentPK(r.AgentID), SK: receivedSortKey(r.ReceivedAt) + "#" + esc(r.AnticipateID)}
	if !legacy {
		idx[lookupAnticipationIDs] = store.IndexKey{PK: anticipationIDsPK(r.AnticipateID), SK: esc(r.AgentID)}
	}
	if r.SessionID != "" && r.PlanID != "" {
		idx[lookupSessions] = store.IndexKey{PK: sessionPK(r.AgentID, r.SessionID), SK: boundSK}
	}
	return expiring(mkItem(key, TypeAnticipation, r, idx))(r.ExpiresAt)
}

// receivedSortKey is received_at at a fixed width, so that the agent's
// listing sorts by time.
func receivedSortKey(receivedAt string) string {
	t, err := time.Parse(time.RFC3339Nano, receivedAt)
	if err != nil {
		return receivedAt
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

func decode[T any](it store.Item) (*T, error) {
	var v T
	if err := json.Unmarshal(it.Data, &v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", it.Key, err)
	}
	return &v, nil
}
