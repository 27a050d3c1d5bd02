package bolt

import (
	"bytes"
	"encoding/binary"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// Expiry. An item with an ExpiresAt has an entry in the expiry bucket,
// keyed by when and then by its table key, kept by every commit that
// writes it. Reads treat an expired item as absent at once; the expirer
// deletes it later, with its index and expiry entries, in bounded runs
// that go through the writer like any commit (so a run holds the file for
// one group's transaction and never stalls commits for long). bbolt puts
// the freed pages on its free list and later commits reuse them, so under
// steady churn the file stops growing.

// DefaultExpiryInterval is how often the expirer looks for expired items
// when Options.ExpiryInterval is zero.
const DefaultExpiryInterval = time.Second

// MaxExpiryRun bounds the items one expiry run deletes; a run that
// reaches it is followed by another at once (after the commits queued
// meanwhile).
const MaxExpiryRun = 1000

// isExpired reports whether an item with expiresAt has expired at now.
func isExpired(expiresAt int64, now time.Time) bool {
	return expiresAt > 0 && expiresAt <= now.Unix()
}

// expiryKey is the expiry bucket's key of the item under tk.
func expiryKey(at int64, tk []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(tk)), uint64(at)), tk...)
}

// moveExpiry keeps the expiry entry of the item under tk when its
// ExpiresAt goes from old to new (zero: none, or deleted).
func moveExpiry(b *bbolt.Bucket, tk []byte, old, new int64) error {
	if old == new {
		return nil
	}
	if old > 0 {
		if err := b.Delete(expiryKey(old, tk)); err != nil {
			return err
		}
	}
	if new > 0 {
		return b.Put(expiryKey(new, tk), nil)
	}
	return nil
}

// dueExpiries returns up to limit keys of the expiry bucket at or before
// now, oldest first.
func (s *Store) dueExpiries(now time.Time, limit int) ([][]byte, error) {
	var out [][]byte
	upTo := binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketExpiry).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			if len(k) < 8 || bytes.Compare(k[:8], upTo) > 0 {
				break
			}
			out = append(out, bytes.Clone(k))
		}
		return nil
	})
	return out, err
}

// expireIn deletes, in tx, the items the expiry keys name that are still
// expired at now (an item written since with a later ExpiresAt, or none,
// has moved its entry), with their index entries, and returns how many of
// each type it deleted. Nothing goes to the feed.
func expireIn(tx *bbolt.Tx, keys [][]byte, now time.Time) (map[string]int, error) {
	items, expiry := tx.Bucket(bucketItems), tx.Bucket(bucketExpiry)
	counts := map[string]int{}
	for _, ek := range keys {
		if len(ek) < 8 {
			continue
		}
		at, tk := int64(binary.BigEndian.Uint64(ek[:8])), ek[8:]
		raw := items.Get(tk)
		if raw == nil {
			if err := expiry.Delete(ek); err != nil {
				return nil, err
			}
			continue
		}
		var h rawHead
		if err := decodeRawHead(raw, &h); err != nil {
			return nil, err
		}
		if h.expiresAt != at {
			// A stale entry (the item moved on): drop it.
			if err := expiry.Delete(ek); err != nil {
				return nil, err
			}
			continue
		}
		if !isExpired(h.expiresAt, now) {
			continue
		}
		it, err := decodeItem(raw)
		if err != nil {
			return nil, err
		}
		var ixks [maxIndexes][]byte
		for slot, k := range h.index[:len(indexNames)] {
			if k.pk != nil {
				ixks[slot] = rawIndexKey(k, tk)
			}
		}
		for slot, ixk := range ixks[:len(indexNames)] {
			if ixk != nil {
				if err := tx.Bucket(bucketIndex[slot]).Delete(ixk); err != nil {
					return nil, err
				}
			}
		}
		if err := items.Delete(tk); err != nil {
			return nil, err
		}
		if err := expiry.Delete(ek); err != nil {
			return nil, err
		}
		counts[it.Type]++
	}
	return counts, nil
}

// expireOnce runs one expiry run through the writer and returns how many
// items it deleted.
func (s *Store) expireOnce() (int, error) {
	keys, err := s.dueExpiries(time.Now(), MaxExpiryRun)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	req := &commitReq{expire: keys, done: make(chan struct{})}
	s.enqueue(req)
	<-req.done
	if req.err != nil {
		return 0, req.err
	}
	n := 0
	for typ, c := range req.expired {
		n += c
		if s.onExpired != nil {
			s.onExpired(typ, c)
		}
	}
	return n, nil
}

// ExpireNow deletes every item expired by now, in runs of at most
// MaxExpiryRun, and returns how many. The expirer does the same on its
// own every Options.ExpiryInterval; tests and tools call it to not wait.
func (s *Store) ExpireNow() (int, error) {
	total := 0
	for {
		n, err := s.expireOnce()
		total += n
		if err != nil || n < MaxExpiryRun {
			return total, err
		}
	}
}

// expirer runs expiry every interval until Close.
func (s *Store) expirer(interval time.Duration) {
	defer close(s.expirerDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopExpirer:
			return
		case <-t.C:
		}
		for {
			n, err := s.expireOnce()
			if err != nil || n < MaxExpiryRun {
				break
			}
			select {
			case <-s.stopExpirer:
				return
			default:
			}
		}
	}
}

// DiskBytes returns the size of the store's file.
func (s *Store) DiskBytes() int64 {
	fi, err := os.Stat(s.db.Path())
	if err != nil {
		return 0
	}
	return fi.Size()
}
