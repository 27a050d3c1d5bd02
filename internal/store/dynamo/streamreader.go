package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// ---- stream reader ----

// StreamOptions configures a StreamReader. The zero value is usable.
type StreamOptions struct {
	// PollInterval is the period of FeedSignal's ticks; zero means one
	// second.
	PollInterval time.Duration
	// EmptyPolls is how many consecutive empty GetRecords answers on an
	// open shard end a ReadFeed's read of that shard; zero means one.
	// DynamoDB may answer empty pages before the records of a shard, so a
	// poller that must not lag may raise it, at one call per empty page.
	EmptyPolls int
	// Checkpoint, when not empty, is a file in which AckFeed records the
	// acknowledged position and from which NewStreamReader resumes, as a
	// Lambda event source mapping keeps its checkpoint: a restarted reader
	// reads again only what was read but not acknowledged. A missing,
	// unreadable or malformed file, or one written for another stream, is
	// ignored: the reader then starts at the oldest retained record, which
	// replays rather than skips.
	Checkpoint string
}

// checkpoint is the content of StreamOptions.Checkpoint.
type checkpoint struct {
	StreamARN string            `json:"streamArn"`
	Acked     string            `json:"acked"`
	Pos       map[string]string `json:"pos"`
}

// StreamReader reads a table's DynamoDB stream (DescribeStream,
// GetShardIterator, GetRecords) and hands out store.Changes. It implements
// store.FeedReader for a single consumer: the acknowledged position is kept
// in memory (and in StreamOptions.Checkpoint when set); without a
// checkpoint a new StreamReader starts again at the oldest record the
// stream retains (TRIM_HORIZON). It is safe for concurrent use, though
// ReadFeed and AckFeed calls are serialized.
type StreamReader struct {
	client *dynamodbstreams.Client
	arn    string
	opts   StreamOptions

	mu       sync.Mutex
	closed   bool
	acked    string            // highest acknowledged Seq; "" for none
	pos      map[string]string // shard -> an acknowledged Seq in it to read after
	ends     map[string]string // closed shard read to its end -> its last Seq ("" if none)
	lastRead []readMark        // what the last ReadFeed returned

	signalOnce sync.Once
	signal     chan struct{}
	stop       chan struct{}
}

type readMark struct{ shard, seq string }

var _ store.FeedReader = (*StreamReader)(nil)

// NewStreamReader returns a reader of the stream streamARN (see StreamARN),
// positioned at its checkpoint, or before its oldest retained record. It
// makes no call.
func NewStreamReader(client *dynamodbstreams.Client, streamARN string, opts StreamOptions) *StreamReader {
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.EmptyPolls <= 0 {
		opts.EmptyPolls = 1
	}
	r := &StreamReader{
		client: client,
		arn:    streamARN,
		opts:   opts,
		pos:    map[string]string{},
		ends:   map[string]string{},
		signal: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	if opts.Checkpoint != "" {
		var cp checkpoint
		if b, err := os.ReadFile(opts.Checkpoint); err == nil && json.Unmarshal(b, &cp) == nil &&
			cp.StreamARN == streamARN && (cp.Acked == "" || isDecimal(cp.Acked)) {
			r.acked = cp.Acked
			for shard, seq := range cp.Pos {
				if isDecimal(seq) {
					r.pos[shard] = seq
				}
			}
		}
	}
	return r
}

// saveCheckpoint writes the acknowledged position to the checkpoint file
// (a new file renamed over the old, so a crash leaves one or the other).
// The caller holds r.mu.
func (r *StreamReader) saveCheckpoint() error {
	b, err := json.Marshal(checkpoint{StreamARN: r.arn, Acked: r.acked, Pos: r.pos})
	if err != nil {
		return err
	}
	tmp := r.opts.Checkpoint + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("dynamo: stream checkpoint: %w", err)
	}
	if err := os.Rename(tmp, r.opts.Checkpoint); err != nil {
		return fmt.Errorf("dynamo: stream checkpoint: %w", err)
	}
	return nil
}

// Close stops FeedSignal's ticker. Closing again is a no-op; it always
// returns nil. After Close, ReadFeed and AckFeed return an error wrapping
// ErrClosed.
func (r *StreamReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.stop)
	}
	return nil
}

// FeedSignal returns a channel with a buffer of one that receives a
// (coalesced, non-blocking) tick every PollInterval until Close. DynamoDB
// Streams cannot push, so a tick means "poll now", not that changes are
// waiting; every commit is followed by a tick within PollInterval.
func (r *StreamReader) FeedSignal() <-chan struct{} {
	r.signalOnce.Do(func() {
		go func() {
			t := time.NewTicker(r.opts.PollInterval)
			defer t.Stop()
			for {
				select {
				case <-r.stop:
					return
				case <-t.C:
					select {
					case r.signal <- struct{}{}:
					default:
					}
				}
			}
		}()
	})
	return r.signal
}

// ReadFeed returns up to limit unacknowledged changes without waiting,
// ordered by sequence number (so in commit order for each item), reading
// every shard of the stream from its acknowledged position. It consumes
// nothing: reading again returns the same changes until AckFeed.
//
// It returns an error wrapping store.ErrInvalid when limit is not positive,
// ErrClosed after Close, ErrCorrupt for a record that does not convert (see
// ChangeFromRecord), ctx.Err() when ctx is done before the first call, and
// the SDK's error (wrapped) when a call fails.
func (r *StreamReader) ReadFeed(ctx context.Context, limit int) ([]store.Change, error) {
	if limit <= 0 {
		return nil, invalidf("feed read limit must be positive, got %d", limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	shards, err := r.shards(ctx)
	if err != nil {
		return nil, err
	}
	type rec struct {
		mark readMark
		ch   store.Change
	}
	var all []rec
	live := make(map[string]bool, len(shards))
	for _, shard := range shards {
		live[shard] = true
		if end, ok := r.ends[shard]; ok && !seqLess(r.acked, end) {
			continue // closed, and acknowledged to its end
		}
		chs, err := r.readShard(ctx, shard, limit)
		if err != nil {
			return nil, err
		}
		for _, ch := range chs {
			all = append(all, rec{readMark{shard, ch.Seq}, ch})
		}
	}
	for shard := range r.pos {
		if !live[shard] {
			delete(r.pos, shard) // expired from the stream
		}
	}
	for shard := range r.ends {
		if !live[shard] {
			delete(r.ends, shard)
		}
	}
	slices.SortStableFunc(all, func(a, b rec) int {
		switch {
		case seqLess(a.ch.Seq, b.ch.Seq):
			return -1
		case seqLess(b.ch.Seq, a.ch.Seq):
			return 1
		}
		return 0
	})
	if len(all) > limit {
		all = all[:limit]
	}
	out := make([]store.Change, len(all))
	r.lastRead = r.lastRead[:0]
	for i, x := range all {
		out[i] = x.ch
		r.lastRead = append(r.lastRead, x.mark)
	}
	return out, nil
}

func (r *StreamReader) begin(ctx context.Context) error {
	if r.closed {
		return ErrClosed
	}
	if r.client == nil || r.arn == "" {
		return errors.New("dynamo: stream reader has no client or stream ARN")
	}
	return ctx.Err()
}

// shards lists the stream's shard IDs.
func (r *StreamReader) shards(ctx context.Context) ([]string, error) {
	var ids []string
	var start *string
	for {
		out, err := r.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn:             aws.String(r.arn),
			ExclusiveStartShardId: start,
		})
		if err != nil {
			return nil, fmt.Errorf("dynamo: describe stream: %w", err)
		}
		if out.StreamDescription == nil {
			return ids, nil
		}
		for _, s := range out.StreamDescription.Shards {
			if id := aws.ToString(s.ShardId); id != "" {
				ids = append(ids, id)
			}
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return ids, nil
		}
	}
}

// readShard returns up to limit unacknowledged changes of one shard, in
// order, starting after the shard's acknowledged position. When it reads a
// closed shard to its end it notes the shard's last sequence number, so
// that the shard is skipped once that is acknowledged.
func (r *StreamReader) readShard(ctx context.Context, shard string, limit int) ([]store.Change, error) {
	iter, err := r.iterator(ctx, shard, r.pos[shard])
	if err != nil {
		return nil, err
	}
	var out []store.Change
	skipped, last := "", r.pos[shard]
	empty := 0
	for iter != nil && len(out) < limit {
		// Ask for no more than is wanted: a page is read (and, on an
		// emulator, encoded) whole.
		page, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{
			ShardIterator: iter,
			Limit:         aws.Int32(int32(min(1000, limit-len(out)))),
		})
		if err != nil {
			return nil, fmt.Errorf("dynamo: get records of shard %s: %w", shard, err)
		}
		for _, rec := range page.Records {
			if rec.Dynamodb == nil {
				return nil, corruptf("stream record without a body in shard %s", shard)
			}
			if seq := aws.ToString(rec.Dynamodb.SequenceNumber); seqLess(last, seq) {
				last = seq
			}
		}
		for _, rec := range page.Records {
			seq := aws.ToString(rec.Dynamodb.SequenceNumber)
			if !seqLess(r.acked, seq) {
				skipped = seq // acknowledged already
				continue
			}
			if len(out) == limit {
				break
			}
			ch, err := ChangeFromRecord(rec)
			if err != nil {
				return nil, fmt.Errorf("dynamo: shard %s: %w", shard, err)
			}
			out = append(out, ch)
		}
		iter = page.NextShardIterator // nil past the end of a closed shard
		if len(page.Records) == 0 {
			if empty++; empty >= r.opts.EmptyPolls {
				break
			}
		} else {
			empty = 0
		}
	}
	if iter == nil {
		r.ends[shard] = last
	}
	if skipped != "" && seqLess(r.pos[shard], skipped) {
		r.pos[shard] = skipped
	}
	return out, nil
}

// iterator returns a shard iterator after seq, or at the shard's oldest
// record when seq is empty or has been trimmed away.
func (r *StreamReader) iterator(ctx context.Context, shard, seq string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         aws.String(r.arn),
		ShardId:           aws.String(shard),
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	}
	if seq != "" {
		in.ShardIteratorType = streamtypes.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(seq)
	}
	out, err := r.client.GetShardIterator(ctx, in)
	var trimmed *streamtypes.TrimmedDataAccessException
	if err != nil && seq != "" && errors.As(err, &trimmed) {
		return r.iterator(ctx, shard, "")
	}
	if err != nil {
		return nil, fmt.Errorf("dynamo: shard iterator of %s: %w", shard, err)
	}
	return out.ShardIterator, nil
}

// AckFeed acknowledges every change with Seq <= upTo, in memory (and in the
// checkpoint file when there is one): later ReadFeeds skip them, and read
// each shard from the last acknowledged record that an earlier ReadFeed
// returned from it. Acknowledging an acknowledged (or earlier) position is
// a no-op. It makes no call.
//
// It returns an error wrapping store.ErrInvalid when upTo is not a decimal
// sequence number, ErrClosed after Close, ctx.Err() when ctx is done, and
// the error of writing the checkpoint file.
func (r *StreamReader) AckFeed(ctx context.Context, upTo string) error {
	if !isDecimal(upTo) || len(upTo) > 64 {
		return invalidf("malformed feed sequence %q", upTo)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if seqLess(r.acked, upTo) {
		r.acked = upTo
	}
	for _, m := range r.lastRead {
		if !seqLess(upTo, m.seq) && seqLess(r.pos[m.shard], m.seq) {
			r.pos[m.shard] = m.seq
		}
	}
	if r.opts.Checkpoint != "" {
		return r.saveCheckpoint()
	}
	return nil
}
