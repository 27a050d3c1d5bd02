package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/store"
	"go.etcd.io/bbolt"
)

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
	if d := s.feedStall(len(ops)); d > 0 && !store.FeedStallExempt(ctx) {
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
	ackUpTo []byte
	// expire, when set, makes the request an expiry run: the items under
	// these keys of the expiry bucket are deleted if still expired
	// (expiry.go); expired counts them by type.
	expire   [][]byte
	expired  map[string]int
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
				if r.expire != nil {
					r.expired, r.err = expireIn(tx, r.expire, at)
					if r.err != nil {
						return r.err
					}
					continue
				}
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
// none, the format before it was kept). An item expired at that time (or
// now, when at is zero) counts as absent: a conditional create over it
// succeeds, an IfVersion write or Check conflicts, and the change of a
// write over it has no old image; deleting it changes nothing the feed
// shows.
func applyAt(tx *bbolt.Tx, ops []op, withFeed bool, at time.Time) (int, error) {
	now := at
	if now.IsZero() {
		now = time.Now()
	}
	items := tx.Bucket(bucketItems)
	expiry := tx.Bucket(bucketExpiry)
	index := make([]*bbolt.Bucket, len(bucketIndex))
	for i := range index {
		index[i] = tx.Bucket(bucketIndex[i])
	}
	olds := make([][]byte, len(ops))
	oldHeads := make([]rawHead, len(ops))
	expired := make([]bool, len(ops))
	for i, o := range ops {
		raw := items.Get(o.tk)
		if raw != nil {
			raw = bytes.Clone(raw)
			if err := decodeRawHead(raw, &oldHeads[i]); err != nil {
				return 0, err
			}
			olds[i] = raw
			expired[i] = isExpired(oldHeads[i].expiresAt, now)
		}
		present := raw != nil && !expired[i]
		switch o.cond.Kind {
		case store.IfAbsent:
			if present {
				return 0, &store.ConflictError{Index: o.idx, Key: o.key}
			}
		case store.IfVersion:
			if !present || oldHeads[i].version != o.cond.Version {
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
			if old != nil && !expired[i] {
				version = oldHeads[i].version + 1
			}
			newRaw = encodeItem(o.put, version)
			if err := items.Put(o.tk, newRaw); err != nil {
				return 0, err
			}
		} else if err := items.Delete(o.tk); err != nil {
			return 0, err
		}
		var newExpiry int64
		if o.put != nil {
			newExpiry = o.put.ExpiresAt
		}
		if err := moveExpiry(expiry, o.tk, oldHeads[i].expiresAt, newExpiry); err != nil {
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
		if expired[i] {
			if o.put == nil {
				continue // an expired item's delete is the expiry's, not a change
			}
			old = nil // a create over an expired item
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
