package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentclock/clockwork/internal/store"
	"go.etcd.io/bbolt"
)

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
