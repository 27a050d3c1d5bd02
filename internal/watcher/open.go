package watcher

import (
	"context"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// The open-instant index (gsi5 OPEN#<shard>) sorts an open expectation by
// its next instant, formatted by expect.FormatTime (RFC 3339 in UTC, fixed
// width up to the seconds). The embedded clock reads it a minute at a time
// (timers.Window) through these methods, which implement timers.Source.

// OpenShards returns the number of partitions of the open-instant index.
func (s *Service) OpenShards() int { return OpenShards }

// OpenBefore returns one page of the open expectations of shard whose next
// instant is before the whole second of before, ordered by next instant,
// each as its current instants, and the token of the next page ("" on the
// last). Errors are the store's (an unknown after token wraps
// store.ErrInvalid).
func (s *Service) OpenBefore(ctx context.Context, shard int, before time.Time, after string, limit int) ([][]expect.Instant, string, error) {
	// Keys of instants in an earlier second sort at or below the second's
	// "2006-01-02T15:04:05"; those in it or later sort above.
	upTo := before.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05")
	return s.openPage(ctx, store.Query{Index: store.GSI5, PK: OpenPK(shard), SKUpTo: upTo, After: after, Limit: limit})
}

// OpenInMinute returns one page of the open expectations of shard whose
// next instant is within the minute that begins at minute, as OpenBefore.
func (s *Service) OpenInMinute(ctx context.Context, shard int, minute time.Time, after string, limit int) ([][]expect.Instant, string, error) {
	prefix := minute.UTC().Format("2006-01-02T15:04")
	return s.openPage(ctx, store.Query{Index: store.GSI5, PK: OpenPK(shard), SKPrefix: prefix, After: after, Limit: limit})
}

func (s *Service) openPage(ctx context.Context, q store.Query) ([][]expect.Instant, string, error) {
	p, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", internal(err)
	}
	out := make([][]expect.Instant, 0, len(p.Items))
	for _, it := range p.Items {
		r, err := DecodeRecord(it)
		if err != nil {
			return nil, "", err
		}
		if ins := expect.Instants(r); len(ins) > 0 {
			out = append(out, ins)
		}
	}
	return out, p.Next, nil
}
