// Package bolt is the embedded adapter of the persistence port: a
// store.Store and store.FeedReader kept in one bbolt file.
//
// Layout. The file holds these buckets:
//
//   - "items": table key -> encoded item;
//   - "index:" + name for every name in store.Indexes: index entry key ->
//     table key, one entry per item that carries a key for that index (the
//     indexes are sparse);
//   - "feed": 8-byte big-endian sequence -> encoded change.
//
// Keys are encoded so that byte order is query order. A string component
// that is followed by another component is escaped (0x00 becomes 0x00 0xFF)
// and terminated by 0x00 0x01; this keeps the encoding unambiguous for keys
// holding any bytes and preserves the order of the strings. The last
// component is stored raw. So a table key is esc(PK) SK and an index entry
// key is esc(indexPK) esc(indexSK) esc(PK) SK: entries sort by index sort key
// and, among equal index sort keys, by table key, which gives pagination a
// total order.
//
// Commits go through bbolt's DB.Batch, so concurrent committers share one
// write transaction and one fsync (group commit). Every condition of a commit
// is checked before any of its writes is made, and the commit's changes are
// appended to the feed in the same transaction.
package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/store"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Settings of the adapter; its key, item and page limits are the store's
// (store.MaxPKBytes and the rest), an item's size counting its keys, type,
// index keys and data.
const (
	// DefaultMaxBatchDelay is the group-commit window used when
	// Options.MaxBatchDelay is zero.
	DefaultMaxBatchDelay = time.Millisecond
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
	// MaxBatchDelay is how long a commit waits for others to share its
	// transaction and fsync; zero means DefaultMaxBatchDelay. Larger values
	// raise throughput under many concurrent committers and add latency to
	// a lone committer.
	MaxBatchDelay time.Duration
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
	db.MaxBatchDelay = DefaultMaxBatchDelay
	if opts.MaxBatchDelay > 0 {
		db.MaxBatchDelay = opts.MaxBatchDelay
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
		names := append([][]byte{bucketItems, bucketFeed}, bucketIndex...)
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
		lagLimit: opts.FeedLagLimit}
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
	return st, nil
}

// Close releases the file. It waits for running reads to finish; commits
// still waiting for their batch fail with an error. Closing again is a no-op
// that returns the first Close's result. After Close every operation returns
// an error wrapping ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
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
// store.ErrNotFound when there is none, store.ErrInvalid for a malformed key,
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
	var it store.Item
	found := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketItems).Get(tk)
		if raw == nil {
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
// index q.Index, in sort-key order (index entries with equal index sort keys
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

// Commit applies writes atomically in one bbolt transaction shared with
// concurrent commits, fsynced unless Options.NoSync. Versions are assigned
// here (1 on create, +1 per put). A delete of an absent item (allowed when
// its condition holds) changes nothing and adds no change to the feed. An
// empty commit is a no-op.
//
// It returns a *store.ConflictError (matching store.ErrConflict) naming the
// first write whose condition fails; an error wrapping store.ErrInvalid when
// there are more than store.MaxCommitWrites writes, two writes of one key, a
// write with neither or both of Put and Delete, an unknown condition kind or
// index, a key outside the size limits (PK 1..MaxPKBytes, SK 1..MaxSKBytes,
// for table and index keys alike), an item over store.MaxItemBytes, or a type that
// is not valid UTF-8 or is longer than store.MaxSKBytes; ErrClosed after Close;
// ctx.Err() when ctx is done before the commit starts (a started commit is
// not canceled); and a wrapped bbolt error when the file cannot be written.
// On any error nothing is written.
func (s *Store) Commit(ctx context.Context, writes []store.Write) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	ops, err := prepare(writes)
	if err != nil {
		return err
	}
	if d := s.feedStall(len(ops)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	req := &commitReq{ops: ops, done: make(chan struct{})}
	s.enqueue(req)
	<-req.done
	err = req.err
	if err != nil {
		var ce *store.ConflictError
		if errors.As(err, &ce) || errors.Is(err, store.ErrInvalid) || errors.Is(err, ErrClosed) {
			return err
		}
		return dbErr("commit", err)
	}
	if req.appended > 0 {
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
	return nil
}

// commitReq is one Commit, or one AckFeed, waiting for the group commit.
type commitReq struct {
	ops []op
	// ackUpTo, when set, makes the request an acknowledgement: the feed
	// entries up to this key are deleted in the group's transaction.
	ackUpTo  []byte
	appended int
	err      error
	done     chan struct{}
}

// maxGroup bounds the commits that share one transaction.
const maxGroup = 2000

// enqueue hands req to the group commit. Commits arriving while a
// transaction is being written wait and then share the next one, so under
// load one fsync serves every commit queued behind it, and a lone commit
// waits for nobody. This replaces bbolt's DB.Batch, whose fixed window
// forms small batches that queue up behind each other on a slow disk.
func (s *Store) enqueue(req *commitReq) {
	s.groupMu.Lock()
	defer s.groupMu.Unlock()
	if s.stopping {
		req.err = ErrClosed
		close(req.done)
		return
	}
	s.queue = append(s.queue, req)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// writer is the store's one committing goroutine: it takes everything
// queued and writes it in one transaction, again and again, until Close.
func (s *Store) writer() {
	defer close(s.writerDone)
	for range s.kick {
		s.writeGroups()
	}
	s.writeGroups() // write whatever was queued before Close
}

func (s *Store) writeGroups() {
	for {
		s.gather()
		s.groupMu.Lock()
		group := s.queue
		if len(group) > maxGroup {
			group = group[:maxGroup]
		}
		s.queue = s.queue[len(group):]
		if len(group) == 0 {
			s.groupMu.Unlock()
			return
		}
		s.groupMu.Unlock()
		at := time.Now() // the commit time its changes carry (feed lag)
		var appended uint64
		err := s.db.Update(func(tx *bbolt.Tx) error {
			defer func() { appended = tx.Bucket(bucketFeed).Sequence() }()
			for _, r := range group {
				if r.ackUpTo != nil {
					if r.err = ackFeed(tx, r.ackUpTo); r.err != nil {
						return r.err
					}
					continue
				}
				// Conditions are checked before anything is written, so a
				// failed commit leaves the shared transaction untouched.
				r.appended, r.err = applyAt(tx, r.ops, true, at)
				var ce *store.ConflictError
				if r.err != nil && !errors.As(r.err, &ce) {
					return r.err
				}
			}
			return nil
		})
		if err == nil {
			s.appended.Store(appended)
			for _, r := range group {
				if r.ackUpTo != nil && r.err == nil {
					if seq := binary.BigEndian.Uint64(r.ackUpTo); seq > s.ackedSeq.Load() {
						s.ackedSeq.Store(seq)
					}
				}
			}
		}
		for _, r := range group {
			if err != nil {
				var ce *store.ConflictError
				if r.err == nil || errors.As(r.err, &ce) {
					// The transaction rolled back: nothing of this group
					// was written.
					r.err = err
				}
				r.appended = 0
			}
			close(r.done)
		}
	}
}

// feedStall returns how long a Commit of n writes waits before it is
// queued: zero unless Options.FeedLagLimit is set and the feed holds more
// than that many unacknowledged changes, then, per write, in proportion to
// the excess (MaxFeedStall at twice the limit and beyond), at most
// MaxCommitStall in all. Per write, so that a commit of many changes (a bulk
// raise of 50 expectations makes 150) waits for what it adds to the feed.
func (s *Store) feedStall(n int) time.Duration {
	if s.lagLimit <= 0 {
		return 0
	}
	appended, acked := s.appended.Load(), s.ackedSeq.Load()
	if appended <= acked {
		return 0
	}
	excess := int64(appended-acked) - int64(s.lagLimit)
	if excess <= 0 {
		return 0
	}
	perWrite := min(MaxFeedStall, time.Duration(excess)*MaxFeedStall/time.Duration(s.lagLimit))
	return min(MaxCommitStall, perWrite*time.Duration(max(n, 1)))
}

// maxGatherYields bounds the yields of one gather.
const maxGatherYields = 8

// gather lets the commits that are about to be queued join the next group:
// it yields the processor while the queue keeps growing (at most
// maxGatherYields times). The writer is woken by the first commit of a
// burst, and without this it would take that commit alone while the
// requests behind it, runnable on the other processors' queues, are a few
// microseconds from queueing theirs; every group costs two fsyncs (about
// 160 µs of CPU each on this project's virtual disk) and its branch, meta
// and free-list pages, so fuller groups cost less CPU per commit. Under no
// load the queue does not grow and gather returns after one yield.
func (s *Store) gather() {
	n := s.queued()
	for range maxGatherYields {
		runtime.Gosched()
		m := s.queued()
		if m == n {
			return
		}
		n = m
	}
}

func (s *Store) queued() int {
	s.groupMu.Lock()
	defer s.groupMu.Unlock()
	return len(s.queue)
}

// op is one validated write, with its keys encoded.
type op struct {
	idx  int
	key  store.Key
	tk   []byte // table key
	cond store.Cond
	put  *store.Item // a private copy; nil for a delete or check
	// check marks a condition check: nothing is written.
	check bool
	// ik holds the item's index entry key in each slot; nil where the
	// item is absent from the index (all of ik nil when it is in none).
	ik [][]byte
}

// prepare validates writes and encodes their keys, outside the transaction.
func prepare(writes []store.Write) ([]op, error) {
	if err := store.CheckWrites(writes); err != nil {
		return nil, err
	}
	ops := make([]op, len(writes))
	for i, w := range writes {
		key := w.Key()
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		o := op{idx: i, key: key, tk: tableKey(nil, key), cond: w.Cond, check: w.Check != nil}
		if w.Put != nil {
			// Data is not copied: Commit encodes it before it returns,
			// and the caller waits for that.
			it := *w.Put
			it.Index = nil
			if !utf8.ValidString(it.Type) || len(it.Type) > store.MaxSKBytes {
				return nil, invalidf("write %d: type is not valid UTF-8", i)
			}
			size := len(key.PK) + len(key.SK) + len(it.Type) + len(it.Data)
			for name, ixk := range w.Put.Index {
				slot := indexSlot(name)
				if slot < 0 && !store.IsLookup(name) {
					return nil, invalidf("write %d: unknown index %q", i, name)
				}
				if ixk.IsZero() {
					continue
				}
				if err := checkKey(store.Key(ixk)); err != nil {
					return nil, fmt.Errorf("write %d: index %s: %w", i, name, err)
				}
				if it.Index == nil {
					it.Index = make(map[store.IndexName]store.IndexKey, len(w.Put.Index))
				}
				it.Index[name] = ixk
				if slot >= 0 {
					if o.ik == nil {
						o.ik = make([][]byte, len(indexNames))
					}
					o.ik[slot] = indexKey(nil, ixk, key)
				}
				size += len(ixk.PK) + len(ixk.SK)
			}
			if size > store.MaxItemBytes {
				return nil, fmt.Errorf("bolt: write %d: item of %d bytes exceeds %d: %w", i, size, store.MaxItemBytes, store.ErrTooLarge)
			}
			o.put = &it
		}
		ops[i] = o
	}
	return ops, nil
}

// apply checks every condition of ops against tx, then makes the writes and,
// when withFeed, appends one change per applied write to the feed. It returns
// the number of changes, or a *store.ConflictError before writing anything.
// It is idempotent given the same starting state: it keeps no state of its
// own and does not modify ops.
func apply(tx *bbolt.Tx, ops []op, withFeed bool) (int, error) {
	return applyAt(tx, ops, withFeed, time.Time{})
}

// applyAt is apply with the commit time the feed's changes carry (zero:
// none, the format before it was kept).
func applyAt(tx *bbolt.Tx, ops []op, withFeed bool, at time.Time) (int, error) {
	items := tx.Bucket(bucketItems)
	index := make([]*bbolt.Bucket, len(bucketIndex))
	for i := range index {
		index[i] = tx.Bucket(bucketIndex[i])
	}
	olds := make([][]byte, len(ops))
	oldHeads := make([]rawHead, len(ops))
	for i, o := range ops {
		raw := items.Get(o.tk)
		if raw != nil {
			raw = bytes.Clone(raw)
			if err := decodeRawHead(raw, &oldHeads[i]); err != nil {
				return 0, err
			}
			olds[i] = raw
		}
		switch o.cond.Kind {
		case store.IfAbsent:
			if raw != nil {
				return 0, &store.ConflictError{Index: o.idx, Key: o.key}
			}
		case store.IfVersion:
			if raw == nil || oldHeads[i].version != o.cond.Version {
				return 0, &store.ConflictError{Index: o.idx, Key: o.key}
			}
		}
	}
	var feed *bbolt.Bucket
	if withFeed {
		feed = tx.Bucket(bucketFeed)
		feed.FillPercent = 1 // append-only: pack pages full
	}
	changes := 0
	for i, o := range ops {
		old := olds[i]
		if o.check || o.put == nil && old == nil {
			continue // a check writes nothing; deleting an absent item changes nothing
		}
		var oldIK [maxIndexes][]byte
		if old != nil {
			for slot, k := range oldHeads[i].index[:len(index)] {
				if k.pk != nil {
					oldIK[slot] = rawIndexKey(k, o.tk)
				}
			}
		}
		var newRaw []byte
		if o.put != nil {
			version := int64(1)
			if old != nil {
				version = oldHeads[i].version + 1
			}
			newRaw = encodeItem(o.put, version)
			if err := items.Put(o.tk, newRaw); err != nil {
				return 0, err
			}
		} else if err := items.Delete(o.tk); err != nil {
			return 0, err
		}
		for slot := range index {
			oldK, newK := oldIK[slot], []byte(nil)
			if o.ik != nil {
				newK = o.ik[slot]
			}
			if bytes.Equal(oldK, newK) {
				continue
			}
			if oldK != nil {
				if err := index[slot].Delete(oldK); err != nil {
					return 0, err
				}
			}
			if newK != nil {
				if err := index[slot].Put(newK, o.tk); err != nil {
					return 0, err
				}
			}
		}
		if feed != nil {
			seq, err := feed.NextSequence()
			if err != nil {
				return 0, err
			}
			if err := feed.Put(binary.BigEndian.AppendUint64(nil, seq), encodeChange(old, newRaw, at)); err != nil {
				return 0, err
			}
		}
		changes++
	}
	return changes, nil
}

// FeedSignal returns a channel with a buffer of one that receives, without
// blocking the committer, after every commit that appended changes. Signals
// coalesce; the channel is never closed.
func (s *Store) FeedSignal() <-chan struct{} { return s.signal }

// ReadFeed returns up to limit unacknowledged changes, oldest first, without
// waiting. Seq is the change's sequence number as a zero-padded 20-digit
// decimal string, so string order is sequence order. It returns an error
// wrapping store.ErrInvalid when limit is not positive, ErrClosed after
// Close, ctx.Err() when ctx is done, and a wrapped bbolt or ErrCorrupt error
// when the file cannot be read.
func (s *Store) ReadFeed(ctx context.Context, limit int) ([]store.Change, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, invalidf("feed read limit must be positive, got %d", limit)
	}
	var out []store.Change
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketFeed).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: feed key of %d bytes", ErrCorrupt, len(k))
			}
			ch, err := decodeChange(v)
			if err != nil {
				return err
			}
			ch.Seq = formatSeq(binary.BigEndian.Uint64(k))
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, dbErr("read feed", err)
	}
	return out, nil
}

// AckFeed durably removes every change with Seq <= upTo; positions already
// acknowledged, or beyond the last change, are accepted. It returns an error
// wrapping store.ErrInvalid when upTo is not a decimal sequence number,
// ErrClosed after Close, ctx.Err() when ctx is done, and a wrapped bbolt
// error when the file cannot be written.
func (s *Store) AckFeed(ctx context.Context, upTo string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	seq, err := parseSeq(upTo)
	if err != nil {
		return err
	}
	// The acknowledgement shares the next group commit (its transaction
	// and fsync) with the commits queued beside it, rather than paying a
	// transaction of its own.
	req := &commitReq{ackUpTo: binary.BigEndian.AppendUint64(nil, seq), done: make(chan struct{})}
	s.enqueue(req)
	<-req.done
	if req.err != nil {
		if errors.Is(req.err, ErrClosed) {
			return req.err
		}
		return dbErr("ack feed", req.err)
	}
	return nil
}

// ackFeed deletes the feed entries whose keys are <= limit. It collects
// the keys first and then deletes each by key, rather than deleting
// through a cursor, which needs a fresh First after each delete (a bbolt
// cursor may skip the entry after a deleted one) that walks again over the
// leaves already emptied: BenchmarkAckFeed, a backlog of 5,000, 4.4 → 3.1–3.8 ms.
func ackFeed(tx *bbolt.Tx, limit []byte) error {
	b := tx.Bucket(bucketFeed)
	var keys []byte // the 8-byte keys, back to back
	c := b.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, limit) <= 0; k, _ = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("%w: feed key of %d bytes", ErrCorrupt, len(k))
		}
		keys = append(keys, k...)
	}
	for i := 0; i+8 <= len(keys); i += 8 {
		if err := b.Delete(keys[i : i+8 : i+8]); err != nil {
			return err
		}
	}
	return nil
}

func formatSeq(seq uint64) string { return fmt.Sprintf("%020d", seq) }

func parseSeq(s string) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, invalidf("malformed feed sequence %q", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, invalidf("malformed feed sequence %q", s)
		}
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, invalidf("malformed feed sequence %q", s)
	}
	return seq, nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("bolt: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}

// checkKey validates a table or index key against the size limits.
func checkKey(k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return fmt.Errorf("bolt: %w", err)
	}
	return nil
}

// ---- key encoding ----

// appendEscapedBody appends s with every 0x00 written as 0x00 0xFF. The
// escaping maps byte order onto byte order and never produces 0x00 0x01.
func appendEscapedBody(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xFF)
		s = s[i+1:]
	}
}

// appendEscaped appends s escaped and terminated by 0x00 0x01, which sorts
// below any continuation, so shorter strings sort first as in string order.
func appendEscaped(dst []byte, s string) []byte {
	return append(appendEscapedBody(dst, s), 0x00, 0x01)
}

// tableKey encodes a table key: esc(PK) SK.
func tableKey(dst []byte, k store.Key) []byte {
	return append(appendEscaped(dst, k.PK), k.SK...)
}

// indexKey encodes an index entry key: esc(indexPK) esc(indexSK) esc(PK) SK.
func indexKey(dst []byte, ixk store.IndexKey, k store.Key) []byte {
	dst = appendEscaped(dst, ixk.PK)
	dst = appendEscaped(dst, ixk.SK)
	return tableKey(dst, k)
}

// successor returns the smallest key greater than every key beginning with
// p, or nil when there is none (p is all 0xFF).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for len(s) > 0 && s[len(s)-1] == 0xFF {
		s = s[:len(s)-1]
	}
	if len(s) == 0 {
		return nil
	}
	s[len(s)-1]++
	return s
}

// clip returns b with its capacity cut to its length, so appends copy.
func clip(b []byte) []byte { return b[:len(b):len(b)] }

// ---- value encoding ----
//
// item:   0x01 uvarint(version) str(type) str(pk) str(sk) uvarint(n)
//         n × (str(index name) str(indexPK) str(indexSK)) data...
// change: 0x01 byte(flags: 1 old, 2 new) [uvarint(len(old)) old] [new]
//         or, with its commit time, 0x02 byte(flags) varint(unix nanoseconds) [...] [new]
// where str(s) is uvarint(len(s)) s.

const formatV1 = 0x01

// formatChangeV2 is a change that carries its commit time.
const formatChangeV2 = 0x02

func appendStr(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func encodeItem(it *store.Item, version int64) []byte {
	n := 1 + 10 + 3*5 + len(it.Type) + len(it.PK) + len(it.SK) + 1 + len(it.Data)
	for name, k := range it.Index {
		n += 3*5 + len(name) + len(k.PK) + len(k.SK)
	}
	b := make([]byte, 0, n)
	b = append(b, formatV1)
	b = binary.AppendUvarint(b, uint64(version))
	b = appendStr(b, it.Type)
	b = appendStr(b, it.PK)
	b = appendStr(b, it.SK)
	b = binary.AppendUvarint(b, uint64(len(it.Index)))
	for _, name := range keyedNames { // a fixed order
		if k, ok := it.Index[name]; ok {
			b = appendStr(b, string(name))
			b = appendStr(b, k.PK)
			b = appendStr(b, k.SK)
		}
	}
	return append(b, it.Data...)
}

// maxIndexes bounds the number of global indexes (store.Indexes).
const maxIndexes = 8

func init() {
	if len(indexNames) > maxIndexes {
		panic("bolt: more global indexes than maxIndexes")
	}
}

// rawHead is the part of an encoded item that a commit needs, without
// copying: the version and, per index slot, the item's index key as
// sub-slices of the encoded item (nil pk where it has none).
type rawHead struct {
	version int64
	index   [maxIndexes]struct{ pk, sk []byte }
}

// decodeRawHead decodes the head of raw into h; its slices alias raw.
func decodeRawHead(raw []byte, h *rawHead) error {
	d := decoder{b: raw}
	if d.byte1() != formatV1 {
		return fmt.Errorf("%w: unknown item format", ErrCorrupt)
	}
	h.version = int64(d.uvarint())
	d.rawStr()
	d.rawStr()
	d.rawStr()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	for range n {
		name, pk, sk := d.rawStr(), d.rawStr(), d.rawStr()
		if d.err {
			return fmt.Errorf("%w: truncated item", ErrCorrupt)
		}
		if len(pk) == 0 {
			continue
		}
		for slot, known := range indexNames {
			if string(name) == string(known) {
				h.index[slot].pk, h.index[slot].sk = pk, sk
				break
			}
		}
	}
	return nil
}

// rawIndexKey encodes an index entry key, esc(indexPK) esc(indexSK) tk,
// from the raw parts of an index key and an encoded table key.
func rawIndexKey(k struct{ pk, sk []byte }, tk []byte) []byte {
	dst := make([]byte, 0, len(k.pk)+len(k.sk)+len(tk)+8)
	dst = appendEscapedRaw(dst, k.pk)
	dst = appendEscapedRaw(dst, k.sk)
	return append(dst, tk...)
}

// appendEscapedRaw is appendEscaped for bytes.
func appendEscapedRaw(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			dst = append(dst, s...)
			return append(dst, 0x00, 0x01)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xFF)
		s = s[i+1:]
	}
}

// head is the part of an encoded item that a commit needs.
type head struct {
	version int64
	index   []indexEntry
}

type indexEntry struct {
	name store.IndexName
	key  store.IndexKey
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// rawStr is str without copying: the bytes alias the decoder's input.
func (d *decoder) rawStr() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeItemParts decodes raw into it (when non-nil) and h.
func decodeItemParts(raw []byte, it *store.Item, h *head) error {
	d := decoder{b: raw}
	if d.byte1() != formatV1 {
		return fmt.Errorf("%w: unknown item format", ErrCorrupt)
	}
	h.version = int64(d.uvarint())
	typ, pk, sk := d.str(), d.str(), d.str()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	h.index = make([]indexEntry, 0, n)
	for range n {
		e := indexEntry{name: store.IndexName(d.str()), key: store.IndexKey{PK: d.str(), SK: d.str()}}
		if d.err {
			return fmt.Errorf("%w: truncated item", ErrCorrupt)
		}
		h.index = append(h.index, e)
	}
	if d.err {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	if it != nil {
		*it = store.Item{Key: store.Key{PK: pk, SK: sk}, Type: typ, Version: h.version}
		if n > 0 {
			it.Index = make(map[store.IndexName]store.IndexKey, n)
			for _, e := range h.index {
				it.Index[e.name] = e.key
			}
		}
		if len(d.b) > 0 {
			it.Data = bytes.Clone(d.b)
		}
	}
	return nil
}

// decodeItem decodes raw into an Item that owns its memory.
func decodeItem(raw []byte) (store.Item, error) {
	var it store.Item
	var h head
	err := decodeItemParts(raw, &it, &h)
	return it, err
}

func encodeChange(old, new []byte, at time.Time) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(old)+len(new))
	if at.IsZero() {
		b = append(b, formatV1)
	} else {
		b = append(b, formatChangeV2)
	}
	var flags byte
	if old != nil {
		flags |= 1
	}
	if new != nil {
		flags |= 2
	}
	b = append(b, flags)
	if !at.IsZero() {
		b = binary.AppendVarint(b, at.UnixNano())
	}
	if old != nil {
		b = binary.AppendUvarint(b, uint64(len(old)))
		b = append(b, old...)
	}
	return append(b, new...)
}

func decodeChange(raw []byte) (store.Change, error) {
	d := decoder{b: raw}
	format, flags := d.byte1(), d.byte1()
	if d.err || format != formatV1 && format != formatChangeV2 || flags == 0 || flags > 3 {
		return store.Change{}, fmt.Errorf("%w: bad change header", ErrCorrupt)
	}
	var ch store.Change
	if format == formatChangeV2 {
		ns, n := binary.Varint(d.b)
		if n <= 0 {
			return store.Change{}, fmt.Errorf("%w: bad change time", ErrCorrupt)
		}
		d.b = d.b[n:]
		ch.At = time.Unix(0, ns).UTC()
	}
	if flags&1 != 0 {
		n := d.uvarint()
		if d.err || n > uint64(len(d.b)) {
			return store.Change{}, fmt.Errorf("%w: truncated change", ErrCorrupt)
		}
		old, err := decodeItem(d.b[:n])
		if err != nil {
			return store.Change{}, err
		}
		d.b = d.b[n:]
		ch.Old = &old
		ch.Key = old.Key
	}
	if flags&2 != 0 {
		nw, err := decodeItem(d.b)
		if err != nil {
			return store.Change{}, err
		}
		ch.New = &nw
		ch.Key = nw.Key
	}
	return ch, nil
}

// FreePages returns the number of pages on the file's free list (free and
// pending), which every commit writes whole: a measure of what a commit
// costs beyond its own pages.
func (s *Store) FreePages() int {
	st := s.db.Stats()
	return st.FreePageN + st.PendingPageN
}
