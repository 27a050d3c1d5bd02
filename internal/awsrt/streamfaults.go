package awsrt

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// StreamFaults are faults of stream delivery that AWS has and a single
// in-order poller does not, injected by the local AWS mode's stream poller
// for tests:
//
//   - DynamoDB Streams keep order per item only: records of items in
//     different shards reach the stream function in any order, and a batch
//     is retried whole after a failure, so records come again. Reorder
//     delivers each batch's records of different items in a random
//     interleaving that keeps every item's own order; Duplicate delivers
//     that fraction of records twice in a row.
//   - A stream function that times out mid-batch has processed part of it
//     and checkpointed nothing: Lambda hands it the whole batch again. Cut
//     is the fraction of batches cut off that way.
//   - Lambda discards a record after its retries or its maximum age (to
//     the on-failure destination, which names it but does not bring its
//     effects about). Discard, when set, drops every record it returns
//     true for, acknowledged as processed.
type StreamFaults struct {
	Reorder   bool
	Duplicate float64
	Cut       float64
	Discard   func(store.Change) bool
	// Seed seeds the random choices; zero seeds from the clock.
	Seed uint64
}

// StreamFaultCounts counts the faults a poller injected.
type StreamFaultCounts struct {
	Reordered, Duplicated, Cut, Discarded int64
}

// faultyFeed is the poller's FeedReader with StreamFaults. It relies on
// what feed.Run does: the whole batch a ReadFeed returned is processed
// before AckFeed, which then acknowledges it all.
type faultyFeed struct {
	store.FeedReader
	f StreamFaults

	mu     sync.Mutex
	rng    *rand.Rand
	maxSeq string // the highest Seq of the batch handed out
	cut    bool   // the batch handed out was cut off: drop its ack
	counts struct{ reordered, duplicated, cut, discarded atomic.Int64 }
}

func newFaultyFeed(fr store.FeedReader, f StreamFaults) *faultyFeed {
	seed := f.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return &faultyFeed{FeedReader: fr, f: f, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// seqAfter reports whether stream sequence number a comes after b
// (decimal strings of any length).
func seqAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

func (ff *faultyFeed) ReadFeed(ctx context.Context, limit int) ([]store.Change, error) {
	chs, err := ff.FeedReader.ReadFeed(ctx, limit)
	if err != nil || len(chs) == 0 {
		return chs, err
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	ff.maxSeq, ff.cut = "", false
	for _, ch := range chs {
		if seqAfter(ch.Seq, ff.maxSeq) {
			ff.maxSeq = ch.Seq
		}
	}
	if ff.f.Discard != nil {
		kept := make([]store.Change, 0, len(chs))
		for _, ch := range chs {
			if ff.f.Discard(ch) {
				ff.counts.discarded.Add(1)
				continue
			}
			kept = append(kept, ch)
		}
		if len(kept) == 0 {
			// Nothing left to process: acknowledged here, as Lambda
			// moves past what it discarded.
			seq := ff.maxSeq
			ff.maxSeq = ""
			return nil, ff.FeedReader.AckFeed(ctx, seq)
		}
		chs = kept
	}
	out := chs
	if ff.f.Reorder {
		out = ff.interleave(chs)
	}
	if ff.f.Duplicate > 0 {
		var dup []store.Change
		for _, ch := range out {
			dup = append(dup, ch)
			if ff.rng.Float64() < ff.f.Duplicate {
				dup = append(dup, ch)
				ff.counts.duplicated.Add(1)
			}
		}
		out = dup
	}
	if len(out) > 1 && ff.rng.Float64() < ff.f.Cut {
		out = out[:1+ff.rng.IntN(len(out)-1)]
		ff.cut = true
		ff.counts.cut.Add(1)
	}
	return out, nil
}

// interleave returns chs in a random order that keeps each item's order.
func (ff *faultyFeed) interleave(chs []store.Change) []store.Change {
	var keys []store.Key
	queues := map[store.Key][]store.Change{}
	for _, ch := range chs {
		if _, ok := queues[ch.Key]; !ok {
			keys = append(keys, ch.Key)
		}
		queues[ch.Key] = append(queues[ch.Key], ch)
	}
	if len(keys) < 2 {
		return chs
	}
	out := make([]store.Change, 0, len(chs))
	for len(keys) > 0 {
		i := ff.rng.IntN(len(keys))
		k := keys[i]
		out = append(out, queues[k][0])
		if queues[k] = queues[k][1:]; len(queues[k]) == 0 {
			keys = append(keys[:i], keys[i+1:]...)
		}
	}
	for i := range out {
		if out[i].Seq != chs[i].Seq {
			ff.counts.reordered.Add(1)
			break
		}
	}
	return out
}

// AckFeed acknowledges the whole batch handed out (its highest Seq), or
// nothing when the batch was cut off.
func (ff *faultyFeed) AckFeed(ctx context.Context, _ string) error {
	ff.mu.Lock()
	seq, cut := ff.maxSeq, ff.cut
	ff.maxSeq, ff.cut = "", false
	ff.mu.Unlock()
	if cut || seq == "" {
		return nil
	}
	return ff.FeedReader.AckFeed(ctx, seq)
}

func (ff *faultyFeed) snapshot() StreamFaultCounts {
	return StreamFaultCounts{Reordered: ff.counts.reordered.Load(), Duplicated: ff.counts.duplicated.Load(), Cut: ff.counts.cut.Load(), Discarded: ff.counts.discarded.Load()}
}
