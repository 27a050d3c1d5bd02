package watcher

import (
	"context"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// ForEachIndexed calls fn with every expectation record in one gsi5
// partition (an OPEN, OUTBOX or DEAD shard), in sort order.
func (s *Service) ForEachIndexed(ctx context.Context, pk string, fn func(*expect.Record) error) error {
	q := store.Query{Index: store.GSI5, PK: pk, Limit: 1000}
	for {
		p, err := s.store.Query(ctx, q)
		if err != nil {
			return internal(err)
		}
		for _, it := range p.Items {
			r, err := DecodeRecord(it)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		q.After = p.Next
	}
}

// ForEachOutbox calls fn with every lapse whose task is still to be sent,
// shard after shard (each in lapse order).
func (s *Service) ForEachOutbox(ctx context.Context, fn func(*expect.Record) error) error {
	if err := s.ForEachIndexed(ctx, legacyOutboxPK, fn); err != nil {
		return err
	}
	return s.forEachShard(ctx, QueueShards, OutboxPK, fn)
}

// ForEachDead calls fn with every dead-lettered lapse, shard after shard
// (each in lapse order).
func (s *Service) ForEachDead(ctx context.Context, fn func(*expect.Record) error) error {
	if err := s.ForEachIndexed(ctx, legacyDeadPK, fn); err != nil {
		return err
	}
	return s.forEachShard(ctx, QueueShards, DeadPK, fn)
}

func (s *Service) forEachShard(ctx context.Context, n int, pk func(int) string, fn func(*expect.Record) error) error {
	for i := range n {
		if err := s.ForEachIndexed(ctx, pk(i), fn); err != nil {
			return err
		}
	}
	return nil
}
