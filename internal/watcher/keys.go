package watcher

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// The single-table layout of the watcher's records. Every key component
// supplied by a client is escaped, so '#' separates components
// unambiguously.
//
//	item          PK           SK
//	agent card    A#<agent>    CARD
//	credentials   A#<agent>    CREDS   (sealed; package credentials)
//	expectation   A#<agent>    E#<expectationId>
//	subject       A#<agent>    S#<type>#<id>
//	fact memory   A#<agent>    F#<factKey>#[<type>#<id>]   (for lookback: the latest fact with the key on the subject, or naming none; expires -fact-lookback-max after it)
//	send claim    A#<agent>    DC#<expectationId>#<replays>.<attempts>   (store.Claim; expires)
//	circuit       A#<agent>    CIRCUIT             (package breaker; while lapse tasks to it fail; expires)
//
// Lookup indexes (store.Lookups: entry items in the table, written in the
// same commit as the expectation and read consistently, because decisions
// depend on them; an expectation has an entry only while the condition
// holds):
//
//	lk1 fact key   FK#<agent>#<factKey>          <expectationId>   open, or lapsed awaiting a late fact
//	lk2 task       TK#<agent>#<taskId>           <expectationId>   open
//	lk3 anchor     AN#<agent>#<anchorId>         <expectationId>   open and anchored
//	lk4 refute     FK#<agent>#<factKey>          <expectationId>   open with refutedBy (lk1's partition: one read finds both)
//
// Global indexes (store.Indexes: GSIs on DynamoDB, read where lag only
// delays what a reader sees):
//
//	gsi2 subject   SU#<agent>#<type>#<id>        <expId>   always (listing by subject)
//	gsi5 work      OPEN#<shard>                  <next instant>#<agent>#<expId>   open
//	               OUTBOX#<shard>                <lapsedAt>#<agent>#<expId>       lapse task not yet delivered
//	               DEAD#<shard>                  <lapsedAt>#<agent>#<expId>       lapse task dead-lettered
//	               AGENTS                        <agent>                          agent card (listing; cards are PUT rarely)
//
// The GSIs project keys only (a reader reads each item it finds), so an
// index costs a write only when an item enters it, leaves it or moves in
// it: the gsi2 key never changes (the state is not in it; a listing by
// state filters), and the gsi5 key changes only at the instants that move
// a record. The work lists are sharded by a hash of the agent and id, so
// that no partition key carries more than its share of the raises and
// lapses (docs/operations.md, "Sustained rates per key").
const (
	TypeCard        = "card"
	TypeExpectation = "expectation"
	TypeSubject     = "subject"
	TypeCredentials = "credentials"
	TypeFactMemory  = "fact"

	// OpenShards spreads open expectations over several gsi5 partitions.
	OpenShards = 64
	// QueueShards spreads the outbox and the dead letters over several
	// gsi5 partitions each.
	QueueShards = 32
)

// The lookup indexes of expectation records.
const (
	lookupFactKey = store.LK1
	lookupTask    = store.LK2
	lookupAnchor  = store.LK3
	lookupRefute  = store.LK4
)

// esc is store.KeyPart, short for the key builders below.
func esc(s string) string { return store.KeyPart(s) }

func agentPK(agent string) string { return "A#" + esc(agent) }

// CircuitKey is the key of the circuit of an agent's A2A endpoint (see
// package breaker): there while lapse tasks to it are failing.
func CircuitKey(agent string) store.Key { return store.Key{PK: agentPK(agent), SK: "CIRCUIT"} }

// CardKey is the key of an agent's card.
func CardKey(agent string) store.Key { return store.Key{PK: agentPK(agent), SK: "CARD"} }

// CredentialsKey is the key of an agent's sealed outbound credentials.
func CredentialsKey(agent string) store.Key { return store.Key{PK: agentPK(agent), SK: "CREDS"} }

// ExpectationKey is the key of one expectation record.
func ExpectationKey(agent, id string) store.Key {
	return store.Key{PK: agentPK(agent), SK: "E#" + esc(id)}
}

// DeliveryClaimKey is the key of the claim on one delivery attempt of a
// lapse task (Service.ClaimDelivery): the attempt is named by the replays
// and attempts before it.
func DeliveryClaimKey(agent, id string, replays, attempts int) store.Key {
	return store.Key{PK: agentPK(agent), SK: fmt.Sprintf("DC#%s#%d.%d", esc(id), replays, attempts)}
}

// FactMemoryKey is the key of the memory of the latest fact accepted with
// factKey on subject (nil: facts that name none; expect.FactMemory).
func FactMemoryKey(agent, factKey string, subject *expect.Subject) store.Key {
	sk := "F#" + esc(factKey) + "#"
	if subject != nil {
		sk += esc(subject.Type) + "#" + esc(subject.ID)
	}
	return store.Key{PK: agentPK(agent), SK: sk}
}

// SubjectKey is the key of one subject record.
func SubjectKey(agent string, s expect.Subject) store.Key {
	return store.Key{PK: agentPK(agent), SK: "S#" + esc(s.Type) + "#" + esc(s.ID)}
}

func factKeyPK(agent, factKey string) string { return "FK#" + esc(agent) + "#" + esc(factKey) }
func subjectPK(agent string, s expect.Subject) string {
	return "SU#" + esc(agent) + "#" + esc(s.Type) + "#" + esc(s.ID)
}

// refutePK is factKeyPK: the refuting expectations of a key share the
// partition of the satisfied ones, so that a fact reads them in one
// lookup (store.Tx.LookupIn).
func refutePK(agent, factKey string) string { return factKeyPK(agent, factKey) }
func anchorPK(agent, id string) string      { return "AN#" + esc(agent) + "#" + esc(id) }
func taskPK(agent, task string) string      { return "TK#" + esc(agent) + "#" + esc(task) }

// TaskStateKey is the key of an origin task's state item (see taskState).
func TaskStateKey(agent, task string) store.Key {
	return store.Key{PK: agentPK(agent), SK: "T#" + esc(task)}
}

func shardHash(agent, id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return h.Sum32()
}

func openShard(agent, id string) string { return OpenPK(int(shardHash(agent, id) % OpenShards)) }

// OpenPK is the gsi5 partition of open expectations of shard n (0 to
// OpenShards-1).
func OpenPK(n int) string { return fmt.Sprintf("OPEN#%02d", n) }

// OutboxPK is the gsi5 partition of undelivered lapses of shard n (0 to
// QueueShards-1).
func OutboxPK(n int) string { return fmt.Sprintf("OUTBOX#%02d", n) }

// The unsharded outbox and dead-letter partitions of earlier versions: an
// embedded data directory may still hold records there (each moves to its
// shard at its next write), so the outbox and dead-letter readers read
// them too. (A DynamoDB table of an earlier version is not reused: its
// indexes projected ALL.)
const (
	legacyOutboxPK = "OUTBOX"
	legacyDeadPK   = "DEAD"
)

// DeadPK is the gsi5 partition of dead-lettered lapses of shard n (0 to
// QueueShards-1).
func DeadPK(n int) string { return fmt.Sprintf("DEAD#%02d", n) }

// PendingDelivery reports whether the record's lapse task still has to be
// sent.
func PendingDelivery(r *expect.Record) bool {
	d := r.Delivery
	return r.State == expect.StateLapsed && d != nil && d.DeliveredAt == "" && !d.DeadLettered && !d.Suppressed
}

// recordItem maps an expectation record onto its item and index keys.
func recordItem(r *expect.Record) (store.Item, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{Key: ExpectationKey(r.AgentID, r.Expectation.ExpectationID), Type: TypeExpectation, Index: recordIndex(r), Data: data}
	if r.ExpiresAt != "" {
		at, err := expect.ParseTime(r.ExpiresAt)
		if err != nil {
			return store.Item{}, fmt.Errorf("expectation %s: expiresAt: %w", it.Key, err)
		}
		it.ExpiresAt = at.Unix()
	}
	return it, nil
}

// recordIndex returns a record's keys in the lookup and global indexes.
func recordIndex(r *expect.Record) map[store.IndexName]store.IndexKey {
	a, id := r.AgentID, r.Expectation.ExpectationID
	eid := esc(id)
	idx := map[store.IndexName]store.IndexKey{
		store.GSI2: {PK: subjectPK(a, r.Expectation.Subject), SK: eid},
	}
	if r.State == expect.StateOpen || (r.State == expect.StateLapsed && r.SatisfiedBy == nil) {
		idx[lookupFactKey] = store.IndexKey{PK: factKeyPK(a, r.Expectation.SatisfiedBy.FactKey), SK: eid}
	}
	if r.State == expect.StateOpen {
		if r.Expectation.Anchor != nil {
			idx[lookupAnchor] = store.IndexKey{PK: anchorPK(a, r.Expectation.Anchor.ExpectationID), SK: eid}
		}
		idx[lookupTask] = store.IndexKey{PK: taskPK(a, r.TaskID), SK: eid}
		if rb := r.Expectation.RefutedBy; rb != nil {
			idx[lookupRefute] = store.IndexKey{PK: refutePK(a, rb.FactKey), SK: eid}
		}
		if next, ok := expect.NextInstant(r); ok {
			idx[store.GSI5] = store.IndexKey{PK: openShard(a, id), SK: expect.FormatTime(next.At) + "#" + esc(a) + "#" + eid}
		}
	}
	if r.State == expect.StateLapsed && r.Lapse != nil {
		suffix := r.Lapse.LapsedAt + "#" + esc(a) + "#" + eid
		shard := int(shardHash(a, id) % QueueShards)
		switch {
		case PendingDelivery(r):
			idx[store.GSI5] = store.IndexKey{PK: OutboxPK(shard), SK: suffix}
		case r.Delivery != nil && r.Delivery.DeadLettered:
			idx[store.GSI5] = store.IndexKey{PK: DeadPK(shard), SK: suffix}
		}
	}
	return idx
}

// DecodeRecord decodes an expectation item.
func DecodeRecord(it store.Item) (*expect.Record, error) {
	var r expect.Record
	if err := json.Unmarshal(it.Data, &r); err != nil {
		return nil, fmt.Errorf("decode expectation %s: %w", it.Key, err)
	}
	r.Version = it.Version
	return &r, nil
}

// subjectItem maps a subject's memory onto its item, which expires retain
// after the last fact reported on it (never when retain is zero): an open
// expectation whose horizon comes later than that after the subject's last
// fact lapses stalled as though no fact had been reported (docs/semantics.md).
func subjectItem(s *expect.SubjectRecord, retain time.Duration) (store.Item, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{Key: SubjectKey(s.AgentID, s.Subject), Type: TypeSubject, Data: data}
	if retain > 0 && s.LastReportedAt != "" {
		if last, err := expect.ParseTime(s.LastReportedAt); err == nil {
			it.ExpiresAt = expect.ExpiryTime(last, retain).Unix()
		}
	}
	return it, nil
}

func decodeSubject(it store.Item) (*expect.SubjectRecord, error) {
	var s expect.SubjectRecord
	if err := json.Unmarshal(it.Data, &s); err != nil {
		return nil, fmt.Errorf("decode subject %s: %w", it.Key, err)
	}
	s.Version = it.Version
	return &s, nil
}

// factMemoryItem maps a fact memory onto its item, which expires keep
// after its fact was accepted.
func factMemoryItem(m *expect.FactMemory, keep time.Duration) (store.Item, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return store.Item{}, err
	}
	accepted, err := expect.ParseTime(m.AcceptedAt)
	if err != nil {
		return store.Item{}, fmt.Errorf("fact memory %s: acceptedAt: %w", m.FactKey, err)
	}
	return store.Item{Key: FactMemoryKey(m.AgentID, m.FactKey, m.Subject), Type: TypeFactMemory, Data: data,
		ExpiresAt: expect.ExpiryTime(accepted, keep).Unix()}, nil
}

func decodeFactMemory(it store.Item) (*expect.FactMemory, error) {
	var m expect.FactMemory
	if err := json.Unmarshal(it.Data, &m); err != nil {
		return nil, fmt.Errorf("decode fact memory %s: %w", it.Key, err)
	}
	return &m, nil
}
