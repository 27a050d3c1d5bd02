// Package bolt is the embedded adapter of the persistence port: a
// store.Store and store.FeedReader kept in one bbolt file.
//
// Layout. The file holds these buckets:
//
//   - "items": table key -> encoded item;
//   - "index:" + name for every name in store.Indexes: index entry key ->
//     table key, one entry per item that carries a key for that index (the
//     indexes are sparse);
//   - "feed": 8-byte big-endian sequence -> encoded change;
//   - "expiry": 8-byte big-endian ExpiresAt + table key -> nothing, one
//     entry per item that expires (expiry.go).
//
// Keys are encoded so that byte order is query order. A string component
// that is followed by another component is escaped (0x00 becomes 0x00 0xFF)
// and terminated by 0x00 0x01; this keeps the encoding unambiguous for keys
// holding any bytes and preserves the order of the strings. The last
// component is stored raw. So a table key is esc(PK) SK and an index entry
// key is esc(indexPK) esc(indexSK) esc(PK) SK: entries sort by index sort key
// and, among equal index sort keys, by table key, which gives pagination a
// total order. Key, item and page limits are the store's (store.MaxPKBytes
// and the rest), an item's size counting its keys, type, index keys and
// data.
//
// Commits are queued to one writer goroutine, which writes everything
// queued in one transaction and one pair of fsyncs (group commit; see
// commit.go). Every condition of a commit is checked before any of its
// writes is made, and the commit's changes are appended to the feed in the
// same transaction (feed.go). The item, key and change encodings are in
// codec.go.
package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrClosed is returned (wrapped) by every operation on a closed Store.
var ErrClosed = errors.New("bolt: store closed")

// ErrOldLayout is returned (wrapped) by Open for a file written before
// lookup indexes replaced the indexes gsi3 and gsi4: its items lack the
// entries lookups read, and there is no migration. Start on a new file.
var ErrOldLayout = errors.New("bolt: the file has the layout of an earlier version (indexes gsi3/gsi4, no lookup entries); start with a new data directory")

// ErrCorrupt is returned (wrapped) when stored bytes cannot be decoded; it
// indicates a damaged file or a bug, never bad input.
var ErrCorrupt = errors.New("bolt: corrupt data")

var (
	bucketItems = []byte("items")
	bucketFeed  = []byte("feed")
	// bucketExpiry orders the items that expire by when: 8-byte
	// big-endian ExpiresAt, then the table key (expiry.go).
	bucketExpiry = []byte("expiry")
	// indexNames are the indexes the adapter maintains: store.Indexes as
	// it was at start-up. A slot is a position in it.
	indexNames = slices.Clone(store.Indexes)
	// bucketIndex holds the bucket name of each index slot.
	bucketIndex = func() [][]byte {
		out := make([][]byte, len(indexNames))
		for i, name := range indexNames {
			out[i] = []byte("index:" + string(name))
		}
		return out
	}()
)

// indexSlot returns the slot of name, or -1 for an unknown index.
func indexSlot(name store.IndexName) int { return slices.Index(indexNames, name) }

// keyedNames are the index names whose keys an item stores: the global
// indexes (each with a bucket) and the lookup indexes (stored only; their
// entries are items of their own, see store.Lookups).
var keyedNames = append(slices.Clone(indexNames), store.Lookups...)

// Options configures Open. The zero value is durable and suitable for
// production.
type Options struct {
	// NoSync skips the fsync after each commit. A crash may then lose or
	// corrupt recent commits: use it for benchmarks and bulk loads only.
	NoSync bool
	// Timeout bounds the wait for the file lock held by another process;
	// zero waits indefinitely.
	Timeout time.Duration
	// FeedLagLimit, when positive, slows committers down while the change
	// feed holds more than this many unacknowledged changes: each Commit
	// first waits, per write, in proportion to the excess (MaxFeedStall per
	// write at twice the limit, MaxCommitStall at most). A consumer that
	// falls behind (a bulk load) then catches up instead of leaving a
	// backlog whose pages stay on the free list, which every later commit
	// writes; a consumer that stops (a change it keeps retrying) slows
	// commits down but never blocks them. Zero: off (a store without a feed
	// consumer).
	FeedLagLimit int
	// ExpiryInterval is how often the expirer deletes expired items
	// (expiry.go); zero means DefaultExpiryInterval, negative runs no
	// expirer (ExpireNow still works).
	ExpiryInterval time.Duration
	// OnExpired, when set, is called after each expiry run with how many
	// items of a type it deleted (for metrics).
	OnExpired func(itemType string, n int)
}

// MaxFeedStall bounds the wait FeedLagLimit adds to a Commit per write, and
// MaxCommitStall the wait of one Commit.
const (
	MaxFeedStall   = 10 * time.Millisecond
	MaxCommitStall = time.Second
)

// Store is the bbolt adapter. It implements store.Store and
// store.FeedReader, and is safe for concurrent use.
type Store struct {
	db     *bbolt.DB
	signal chan struct{}

	groupMu    sync.Mutex
	queue      []*commitReq
	kick       chan struct{}
	stopping   bool // set under groupMu by Close
	writerDone chan struct{}

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// The change feed's length for FeedLagLimit: the last sequence
	// appended and the last acknowledged, kept by the writer.
	lagLimit           int
	appended, ackedSeq atomic.Uint64

	onExpired   func(string, int)
	stopExpirer chan struct{}
	expirerDone chan struct{}
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.FeedReader = (*Store)(nil)
)

// Open opens (creating if needed) the store in the file at path. The list of
// free pages is written with each commit, so that opening reads it rather
// than rebuilding it by scanning the whole file: after a crash a store of
// 1,000,000 open expectations (2.7 GB) opens in milliseconds instead of
// seconds, without mapping the whole file into memory. The cost is the
// list's pages in each commit (no extra fsync): 8 bytes per free page, and
// a store that held a large change-feed backlog (a bulk load the feed fell
// behind) keeps its pages free afterwards, 70,000 of them (560 KB per
// commit) after raising 1,000,000 expectations in bulk without
// Options.FeedLagLimit (317 with it). The list is kept as
// bbolt's sorted array, which writes it by merging sorted runs, rather than
// its hash map, which sorts every free span again at each commit (a fact
// cost 3.3–3.6 ms of CPU instead of 7.5–11.7 ms at that size; the file format is
// the same). A file last written without the list (by an earlier
// version) is scanned once at its first open. It returns an error when the file cannot be opened or locked within
// opts.Timeout (the file is locked by one process at a time) or is not a
// valid store, and one wrapping ErrOldLayout for a file of an earlier layout.
func Open(path string, opts Options) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        opts.Timeout,
		NoSync:         opts.NoSync,
		NoFreelistSync: false,
		FreelistType:   bbolt.FreelistArrayType,
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		// Before lookup indexes, decisions read the indexes gsi3 and gsi4;
		// their items have no lookup entries, so a lookup would miss them.
		for _, old := range []string{"index:gsi3", "index:gsi4"} {
			if b := tx.Bucket([]byte(old)); b != nil {
				if k, _ := b.Cursor().First(); k == nil {
					continue
				}
				return ErrOldLayout
			}
		}
		names := append([][]byte{bucketItems, bucketFeed, bucketExpiry}, bucketIndex...)
		for _, name := range names {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	st := &Store{db: db, signal: make(chan struct{}, 1), kick: make(chan struct{}, 1), writerDone: make(chan struct{}),
		lagLimit: opts.FeedLagLimit, onExpired: opts.OnExpired, stopExpirer: make(chan struct{}), expirerDone: make(chan struct{})}
	_ = db.View(func(tx *bbolt.Tx) error {
		feed := tx.Bucket(bucketFeed)
		last := feed.Sequence()
		st.appended.Store(last)
		st.ackedSeq.Store(last)
		if k, _ := feed.Cursor().First(); len(k) == 8 {
			st.ackedSeq.Store(binary.BigEndian.Uint64(k) - 1)
		}
		return nil
	})
	go st.writer()
	switch interval := opts.ExpiryInterval; {
	case interval < 0:
		close(st.expirerDone)
	case interval == 0:
		go st.expirer(DefaultExpiryInterval)
	default:
		go st.expirer(interval)
	}
	return st, nil
}

// Close releases the file. It waits for running reads to finish; commits
// still waiting for their batch fail with an error. Closing again is a no-op
// that returns the first Close's result. After Close every operation returns
// an error wrapping ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopExpirer)
		<-s.expirerDone
		// Commits already queued are written; later ones fail.
		s.groupMu.Lock()
		s.closed.Store(true)
		s.stopping = true
		close(s.kick)
		s.groupMu.Unlock()
		<-s.writerDone
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("bolt: close: %w", err)
		}
	})
	return s.closeErr
}

// begin checks that the store is open and ctx is live.
func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// dbErr wraps an error of bbolt, mapping the closed-database error to
// ErrClosed.
func dbErr(op string, err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("bolt: %s: %w", op, ErrClosed)
	}
	return fmt.Errorf("bolt: %s: %w", op, err)
}

// Get returns the item under key. It returns an error wrapping
// store.ErrNotFound when there is none (or it has expired), store.ErrInvalid for a malformed key,
// ErrClosed after Close, ctx.Err() when ctx is done, and a wrapped bbolt or
// ErrCorrupt error when the file cannot be read.
func (s *Store) Get(ctx context.Context, key store.Key) (store.Item, error) {
	if err := s.begin(ctx); err != nil {
		return store.Item{}, err
	}
	if err := checkKey(key); err != nil {
		return store.Item{}, err
	}
	tk := tableKey(nil, key)
	now := time.Now()
	var it store.Item
	found := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketItems).Get(tk)
		if raw == nil || isExpired(itemExpiresAt(raw), now) {
			return nil
		}
		found = true
		var err error
		it, err = decodeItem(raw)
		return err
	})
	if err != nil {
		return store.Item{}, dbErr("get", err)
	}
	if !found {
		return store.Item{}, fmt.Errorf("bolt: get %s: %w", key, store.ErrNotFound)
	}
	return it, nil
}

// Query returns one page of the items of partition q.PK in the table or in
// index q.Index that have not expired, in sort-key order (index entries with equal index sort keys
// are ordered by table key). A zero Limit means store.DefaultLimit and a Limit
// above store.MaxLimit is lowered to it. Next is set only when more items follow.
// It returns an error wrapping store.ErrInvalid for an empty or oversized
// PK, an unknown index, a negative Limit, or a malformed After token (one not
// issued for this partition); ErrClosed after Close; ctx.Err() when ctx is
// done; and a wrapped bbolt or ErrCorrupt error when the file cannot be read.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := s.begin(ctx); err != nil {
		return store.Page{}, err
	}
	slot := -1
	if q.Index != "" {
		if slot = indexSlot(q.Index); slot < 0 {
			return store.Page{}, invalidf("unknown index %q", q.Index)
		}
	}
	if q.PK == "" || len(q.PK) > store.MaxPKBytes {
		return store.Page{}, invalidf("query partition key must have 1 to %d bytes", store.MaxPKBytes)
	}
	if len(q.SKPrefix) > store.MaxSKBytes || len(q.SKUpTo) > store.MaxSKBytes {
		return store.Page{}, invalidf("query sort key bounds must have at most %d bytes", store.MaxSKBytes)
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return store.Page{}, invalidf("negative query limit %d", limit)
	case limit == 0:
		limit = store.DefaultLimit
	case limit > store.MaxLimit:
		limit = store.MaxLimit
	}

	// The page is the key range [lo, hi).
	base := appendEscaped(nil, q.PK)
	var lo, hi []byte
	if slot < 0 {
		lo = append(clip(base), q.SKPrefix...)
	} else {
		lo = appendEscapedBody(clip(base), q.SKPrefix)
	}
	hi = successor(lo)
	if q.SKUpTo != "" {
		var up []byte
		if slot < 0 {
			// Keys with SK <= SKUpTo are the keys <= base+SKUpTo.
			up = append(append(clip(base), q.SKUpTo...), 0x00)
		} else {
			// Entries with index SK <= SKUpTo begin with at most
			// esc(SKUpTo) 0x00 0x01; esc(SKUpTo) 0x00 0x02 follows them all.
			up = append(appendEscapedBody(clip(base), q.SKUpTo), 0x00, 0x02)
		}
		if bytes.Compare(up, hi) < 0 {
			hi = up
		}
	}
	if q.After != "" {
		after, err := base64.RawURLEncoding.DecodeString(q.After)
		if err != nil || len(after) <= len(base) || !bytes.HasPrefix(after, base) {
			return store.Page{}, invalidf("malformed After token")
		}
		if q.Descending {
			if bytes.Compare(after, hi) < 0 {
				hi = after
			}
		} else if next := append(after, 0x00); bytes.Compare(next, lo) > 0 {
			lo = next
		}
	}

	var page store.Page
	if bytes.Compare(lo, hi) >= 0 {
		return page, nil
	}
	now := time.Now()
	err := s.db.View(func(tx *bbolt.Tx) error {
		items := tx.Bucket(bucketItems)
		b := items
		if slot >= 0 {
			b = tx.Bucket(bucketIndex[slot])
		}
		c := b.Cursor()
		var k, v []byte
		var inRange func() bool
		var step func() ([]byte, []byte)
		if q.Descending {
			if k, _ = c.Seek(hi); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			inRange = func() bool { return k != nil && bytes.Compare(k, lo) >= 0 }
			step = c.Prev
		} else {
			k, v = c.Seek(lo)
			inRange = func() bool { return k != nil && bytes.Compare(k, hi) < 0 }
			step = c.Next
		}
		var last []byte
		for ; inRange(); k, v = step() {
			if len(page.Items) == limit {
				page.Next = base64.RawURLEncoding.EncodeToString(last)
				break
			}
			raw := v
			if slot >= 0 {
				if raw = items.Get(v); raw == nil {
					return fmt.Errorf("%w: index %s entry without item", ErrCorrupt, indexNames[slot])
				}
			}
			if isExpired(itemExpiresAt(raw), now) {
				continue
			}
			it, err := decodeItem(raw)
			if err != nil {
				return err
			}
			page.Items = append(page.Items, it)
			last = k
		}
		return nil
	})
	if err != nil {
		return store.Page{}, dbErr("query", err)
	}
	return page, nil
}

// FreePages returns the number of pages on the file's free list (free and
// pending), which every commit writes whole: a measure of what a commit
// costs beyond its own pages.
func (s *Store) FreePages() int {
	st := s.db.Stats()
	return st.FreePageN + st.PendingPageN
}
