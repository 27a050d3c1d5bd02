// Package store is the persistence port: a single-table item store with
// conditional writes, atomic multi-item commits, sparse secondary indexes and a
// change feed. It is shaped so that DynamoDB (PutItem/TransactWriteItems with
// condition expressions, sparse GSIs, Streams with NEW_AND_OLD_IMAGES)
// implements it one to one, and so that an embedded adapter (bbolt) can offer
// the same semantics in one process.
//
// The port knows nothing about expectations or anticipations: typed
// repositories map domain records onto Items (see package records).
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Key identifies one item: a partition key and a sort key, as in a DynamoDB
// single table.
type Key struct {
	PK string `json:"pk"`
	SK string `json:"sk"`
}

// String renders the key for logs and errors.
func (k Key) String() string { return k.PK + "|" + k.SK }

// IndexName names one of the table's secondary indexes: a global index or a
// lookup index (see Indexes and Lookups).
type IndexName string

// The table's global secondary indexes. Each is sparse: an item appears in
// an index only when it carries a non-empty key for it. Adapters must
// support every name in Indexes. On DynamoDB a global index is a GSI, which
// shows a commit only after a delay (eventually consistent): use one only
// where that lag merely delays what a reader sees (listings, sweeps), never
// for a decision. Their meaning is assigned by the typed repositories (see
// package records), not here.
const (
	GSI1 IndexName = "gsi1"
	GSI2 IndexName = "gsi2"
	GSI5 IndexName = "gsi5"
)

// Indexes lists every global secondary index, in a fixed order.
var Indexes = []IndexName{GSI1, GSI2, GSI5}

// The table's lookup indexes: for decisions that must see every commit
// that came before them. An item's key in a lookup index is stored with the
// item (adapters keep it like any other index key, but build no index from
// it), and Update (Tx) keeps one entry item per item and lookup index in the
// table itself, written and deleted in the same atomic commit as the item:
// the entry's key is the item's lookup key and it names the item. A lookup
// (Tx.Lookup) reads the entries' partition from the table, consistently,
// and then the items themselves. So on every adapter a lookup sees exactly
// the commits that finished before it began.
//
// Lookup keys share the table's key space: a repository gives them
// partition keys of their own (a prefix no table item uses), and an
// (index PK, index SK) pair must name one item. Writes made with
// Store.Commit directly do not maintain entries; use Update for items with
// lookup keys.
const (
	LK1 IndexName = "lk1"
	LK2 IndexName = "lk2"
	LK3 IndexName = "lk3"
	LK4 IndexName = "lk4"
)

// Lookups lists every lookup index, in a fixed order.
var Lookups = []IndexName{LK1, LK2, LK3, LK4}

// TypeLookupEntry is the type of the entry items of lookup indexes. Change
// feed consumers see them like any other change and may ignore them.
const TypeLookupEntry = "lookup"

// IsLookup reports whether name is a lookup index.
func IsLookup(name IndexName) bool { return slices.Contains(Lookups, name) }

// IndexKey is an item's key in one secondary index. The zero value means the
// item is absent from that index.
type IndexKey struct {
	PK string `json:"pk"`
	SK string `json:"sk"`
}

// IsZero reports whether the item is absent from the index.
func (k IndexKey) IsZero() bool { return k.PK == "" }

// Item is one stored record: its key, a type tag, an optimistic-concurrency
// version, its keys in the secondary indexes, and an opaque JSON body.
type Item struct {
	Key
	// Type names the record type ("expectation", "subject", ...); change
	// feed consumers dispatch on it.
	Type string `json:"type"`
	// Version is 1 after the item is created and grows by one with every
	// put. Callers never set it: Commit assigns it.
	Version int64 `json:"version"`
	// Index holds the item's keys in the secondary indexes; a missing or
	// zero entry keeps the item out of that index.
	Index map[IndexName]IndexKey `json:"index,omitempty"`
	// Data is the record body, JSON.
	Data []byte `json:"data"`
	// ExpiresAt, when non-zero, is when the item expires, in Unix seconds
	// (DynamoDB's TTL attribute). From then on every adapter treats it as
	// absent: Get answers ErrNotFound, Query leaves it out, a conditional
	// create over it succeeds and an IfVersion write or Check conflicts.
	// Adapters delete expired items eventually (DynamoDB's TTL within
	// days, the embedded store within seconds); those deletions are not
	// changes of the feed (a DynamoDB stream carries them as REMOVEs that
	// Change.Expired marks). A repository gives every item of one record
	// the same ExpiresAt, so that no read sees part of a record; Update
	// gives a lookup entry its item's.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

// Expired reports whether the item has expired at now.
func (it Item) Expired(now time.Time) bool {
	return it.ExpiresAt > 0 && it.ExpiresAt <= now.Unix()
}

// CondKind is the kind of condition a write carries.
type CondKind int

const (
	// Unconditional writes whatever is there.
	Unconditional CondKind = iota
	// IfAbsent requires that no item exists under the key (conditional create).
	IfAbsent
	// IfVersion requires that the item exists with exactly Cond.Version
	// (compare-and-set).
	IfVersion
)

// Cond is the condition of one write.
type Cond struct {
	Kind    CondKind
	Version int64
}

// Write is one put, delete or condition check in a commit. Exactly one of
// Put, Delete and Check is set.
type Write struct {
	Put    *Item
	Delete *Key
	// Check, when set, writes nothing: the commit only requires Cond to
	// hold for the item under this key (DynamoDB's ConditionCheck), so that
	// a decision made on what was read of it fails with a conflict when a
	// concurrent commit changed it. Its condition must not be Unconditional.
	Check *Key
	Cond  Cond
}

// Key returns the key the write touches.
func (w Write) Key() Key {
	switch {
	case w.Put != nil:
		return w.Put.Key
	case w.Delete != nil:
		return *w.Delete
	case w.Check != nil:
		return *w.Check
	}
	return Key{}
}

// PutIfAbsent returns a conditional create of it.
func PutIfAbsent(it Item) Write { return Write{Put: &it, Cond: Cond{Kind: IfAbsent}} }

// PutIfVersion returns a compare-and-set put of it against version v.
func PutIfVersion(it Item, v int64) Write {
	return Write{Put: &it, Cond: Cond{Kind: IfVersion, Version: v}}
}

// Query selects items by partition key in the table or in one index, in
// ascending sort-key order unless Descending.
type Query struct {
	// Index is the index to read; empty means the table.
	Index IndexName
	// PK is the partition key to read (required).
	PK string
	// SKPrefix keeps items whose sort key begins with it.
	SKPrefix string
	// SKUpTo, when set, keeps items whose sort key is <= SKUpTo.
	SKUpTo string
	// Limit bounds the page size; zero means the adapter's default (100).
	Limit int
	// Descending reverses the sort order.
	Descending bool
	// After is the Next token of the previous page.
	After string
}

// Page is one page of query results. Next is empty on the last page.
type Page struct {
	Items []Item
	Next  string
}

// Change is one entry of the change feed: the item before and after one
// committed write. Old is nil for a create and New is nil for a delete.
type Change struct {
	// Seq orders changes; it is the stream sequence number in DynamoDB and a
	// zero-padded counter in the embedded adapter.
	Seq string
	Key Key
	Old *Item
	New *Item
	// At is when the change was committed, as well as the adapter knows:
	// the embedded store's commit, DynamoDB's stream record creation time
	// (ApproximateCreationDateTime, to the second). Zero when unknown.
	At time.Time
	// Expired marks the deletion of an expired item by the store itself
	// (DynamoDB's TTL, whose REMOVE records name the service principal
	// dynamodb.amazonaws.com): not a change any caller made, so consumers
	// count it and otherwise ignore it. The embedded store's expiry
	// appends nothing to its feed.
	Expired bool
}

// Type returns the record type of the change.
func (c Change) Type() string {
	if c.New != nil {
		return c.New.Type
	}
	if c.Old != nil {
		return c.Old.Type
	}
	return ""
}

// Store is the persistence port.
type Store interface {
	// Get returns the item under key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key Key) (Item, error)
	// Query returns one page of items. A malformed After token is an error
	// wrapping ErrInvalid.
	Query(ctx context.Context, q Query) (Page, error)
	// Commit applies every write atomically, or none of them. When a
	// condition fails it returns a *ConflictError (which matches
	// ErrConflict) naming the first failing write. An adapter also returns
	// one when the commit was refused for a concurrent one on the same
	// item (DynamoDB's TransactionConflict), although no condition failed:
	// a caller must read again before it concludes that the item is not
	// as its condition expected (Update does). Versions are assigned by
	// Commit. Each applied write appears in the change feed, in the same
	// atomic step.
	Commit(ctx context.Context, writes []Write) error
	// Close releases the store.
	Close() error
}

// MaxCommitWrites bounds one atomic commit (DynamoDB transactions allow 100).
const MaxCommitWrites = 100

// Limits every adapter keeps. They are DynamoDB's, so that data one adapter
// accepts the other accepts too.
const (
	// MaxPKBytes bounds the length of a partition key (table or index).
	MaxPKBytes = 2048
	// MaxSKBytes bounds the length of a sort key (table or index).
	MaxSKBytes = 1024
	// MaxItemBytes bounds the size of one item, as each adapter measures
	// it (DynamoDB: attribute names plus values).
	MaxItemBytes = 400 * 1024
	// DefaultLimit is the page size of a Query without a Limit.
	DefaultLimit = 100
	// MaxLimit caps the page size of a Query; larger limits are lowered to it.
	MaxLimit = 1000
)

// CheckKey returns an error wrapping ErrInvalid when a table or index key
// is outside the size limits.
func CheckKey(k Key) error {
	if k.PK == "" || len(k.PK) > MaxPKBytes {
		return fmt.Errorf("partition key must have 1 to %d bytes: %w", MaxPKBytes, ErrInvalid)
	}
	if k.SK == "" || len(k.SK) > MaxSKBytes {
		return fmt.Errorf("sort key must have 1 to %d bytes: %w", MaxSKBytes, ErrInvalid)
	}
	return nil
}

// Errors of the port.
var (
	ErrNotFound = errors.New("store: not found")
	ErrConflict = errors.New("store: condition failed")
	ErrInvalid  = errors.New("store: invalid request")
	// ErrTooLarge is returned (wrapped) by Commit for an item over the
	// adapter's size bound (DynamoDB's 400 KB); it also matches ErrInvalid.
	ErrTooLarge = fmt.Errorf("store: item too large: %w", ErrInvalid)
)

// ConflictError reports which write of a commit failed its condition.
type ConflictError struct {
	Index int
	Key   Key
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: condition failed on write %d (%s)", e.Index, e.Key)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FeedReader is the pull side of an embedded change feed, read by a single
// consumer. (DynamoDB Streams are read by Lambda or by a stream poller
// instead; both hand Changes to the same processor.)
type FeedReader interface {
	// ReadFeed returns up to limit unacknowledged changes, oldest first,
	// without waiting; an empty result means the feed is drained.
	ReadFeed(ctx context.Context, limit int) ([]Change, error)
	// AckFeed durably removes every change with Seq <= upTo. Acknowledging
	// an already acknowledged position is a no-op.
	AckFeed(ctx context.Context, upTo string) error
	// FeedSignal returns a channel that receives (coalesced, non-blocking)
	// after every commit that appended changes.
	FeedSignal() <-chan struct{}
}

// CheckWrites checks the shape of a commit that every adapter refuses
// alike: at most MaxCommitWrites writes, exactly one of Put, Delete and
// Check in each, a known condition kind (not Unconditional for a Check),
// and no key written twice. It returns ErrTooManyWrites or an error
// wrapping ErrInvalid naming the write. Adapters add their own key and size
// limits.
func CheckWrites(writes []Write) error {
	if len(writes) > MaxCommitWrites {
		return ErrTooManyWrites
	}
	seen := make(map[Key]struct{}, len(writes))
	for i, w := range writes {
		set := 0
		for _, b := range []bool{w.Put != nil, w.Delete != nil, w.Check != nil} {
			if b {
				set++
			}
		}
		if set != 1 {
			return fmt.Errorf("write %d: exactly one of Put, Delete and Check must be set: %w", i, ErrInvalid)
		}
		switch w.Cond.Kind {
		case Unconditional, IfAbsent, IfVersion:
		default:
			return fmt.Errorf("write %d: unknown condition kind %d: %w", i, w.Cond.Kind, ErrInvalid)
		}
		if w.Check != nil && w.Cond.Kind == Unconditional {
			return fmt.Errorf("write %d: a Check needs a condition: %w", i, ErrInvalid)
		}
		key := w.Key()
		if _, dup := seen[key]; dup {
			return fmt.Errorf("write %d: key %s written twice in one commit: %w", i, key, ErrInvalid)
		}
		seen[key] = struct{}{}
	}
	return nil
}

type noFeedStallKey struct{}

// WithoutFeedStall marks ctx's commits as exempt from a store's change-feed
// backpressure (the embedded store slows committers while its feed is far
// behind, which bulk writers must feel): the clock's lapse commits use it,
// so that instants land on time whatever a bulk load or a stuck change has
// left in the feed.
func WithoutFeedStall(ctx context.Context) context.Context {
	return context.WithValue(ctx, noFeedStallKey{}, true)
}

// FeedStallExempt reports whether ctx's commits skip feed backpressure.
func FeedStallExempt(ctx context.Context) bool {
	v, _ := ctx.Value(noFeedStallKey{}).(bool)
	return v
}
