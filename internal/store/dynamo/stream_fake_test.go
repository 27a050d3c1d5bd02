package dynamo_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// fakeStream serves DynamoDB Streams on loopback with several shards, which
// the emulator never has: shard s1 is closed, s2 is open, and their sequence
// numbers interleave. Pages hold at most two records.
type fakeStream struct {
	mu      sync.Mutex
	shards  map[string][]int // shard -> sequence numbers of its records
	closed  map[string]bool
	trimmed map[string]int // shard -> records before this seq are gone
	calls   []string       // "Op shard type seq"
}

func (f *fakeStream) record(shard string, seq int) map[string]any {
	img := func(v int) map[string]any {
		return map[string]any{"pk": map[string]string{"S": "p"}, "sk": map[string]string{"S": fmt.Sprint(seq)},
			"type": map[string]string{"S": "test"}, "version": map[string]string{"N": fmt.Sprint(v)}}
	}
	return map[string]any{"eventID": fmt.Sprint(seq), "eventName": "INSERT",
		"dynamodb": map[string]any{"Keys": map[string]any{"pk": map[string]string{"S": "p"}, "sk": map[string]string{"S": fmt.Sprint(seq)}},
			"NewImage": img(1), "SequenceNumber": fmt.Sprint(seq), "StreamViewType": "NEW_AND_OLD_IMAGES"}}
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var in map[string]any
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &in)
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDBStreams_20120810.")
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch op {
	case "DescribeStream":
		f.calls = append(f.calls, op)
		var shards []map[string]any
		for _, id := range []string{"s1", "s2"} {
			shards = append(shards, map[string]any{"ShardId": id, "SequenceNumberRange": map[string]string{"StartingSequenceNumber": "1"}})
		}
		reply(map[string]any{"StreamDescription": map[string]any{"StreamArn": str("StreamArn"), "StreamStatus": "ENABLED", "Shards": shards}})
	case "GetShardIterator":
		shard, typ, seq := str("ShardId"), str("ShardIteratorType"), str("SequenceNumber")
		f.calls = append(f.calls, strings.TrimSpace(op+" "+shard+" "+typ+" "+seq))
		pos := 0 // index of the next record
		recs := f.shards[shard]
		if typ == "AFTER_SEQUENCE_NUMBER" {
			n, _ := strconv.Atoi(seq)
			if n < f.trimmed[shard] {
				w.WriteHeader(400)
				reply(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#TrimmedDataAccessException", "message": "trimmed"})
				return
			}
			pos = len(recs)
			for i, s := range recs {
				if s > n {
					pos = i
					break
				}
			}
		}
		for pos < len(recs) && recs[pos] < f.trimmed[shard] {
			pos++
		}
		reply(map[string]string{"ShardIterator": fmt.Sprintf("%s|%d", shard, pos)})
	case "GetRecords":
		shard, p, _ := strings.Cut(str("ShardIterator"), "|")
		pos, _ := strconv.Atoi(p)
		f.calls = append(f.calls, op+" "+shard)
		recs := f.shards[shard]
		end := min(pos+2, len(recs))
		out := map[string]any{"Records": []any{}}
		var page []any
		for _, seq := range recs[pos:end] {
			page = append(page, f.record(shard, seq))
		}
		if page != nil {
			out["Records"] = page
		}
		if end < len(recs) || !f.closed[shard] {
			out["NextShardIterator"] = fmt.Sprintf("%s|%d", shard, end)
		}
		reply(out)
	default:
		w.WriteHeader(400)
		reply(map[string]string{"__type": "UnknownOperationException"})
	}
}

func (f *fakeStream) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func seqs(chs []store.Change) []string {
	var out []string
	for _, ch := range chs {
		out = append(out, ch.Seq)
	}
	return out
}

func TestStreamReaderShards(t *testing.T) {
	f := &fakeStream{
		shards:  map[string][]int{"s1": {100, 300, 500}, "s2": {200, 400, 600, 700}},
		closed:  map[string]bool{"s1": true},
		trimmed: map[string]int{},
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	_, st := dynamotest.NewClients(srv.URL)
	r := dynamo.NewStreamReader(st, "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x", dynamo.StreamOptions{})
	defer r.Close()
	ctx := ctxT(t)
	read := func(limit int, want ...string) {
		t.Helper()
		chs, err := r.ReadFeed(ctx, limit)
		if err != nil {
			t.Fatalf("ReadFeed(%d): %v", limit, err)
		}
		if got := seqs(chs); !slices.Equal(got, want) {
			t.Fatalf("ReadFeed(%d) = %q, want %q", limit, got, want)
		}
	}
	read(100, "100", "200", "300", "400", "500", "600", "700")
	read(3, "100", "200", "300")
	if err := r.AckFeed(ctx, "300"); err != nil {
		t.Fatal(err)
	}
	f.takeCalls()
	read(2, "400", "500")
	// Each shard resumes after its own acknowledged record.
	if c := f.takeCalls(); !slices.Contains(c, "GetShardIterator s1 AFTER_SEQUENCE_NUMBER 300") ||
		!slices.Contains(c, "GetShardIterator s2 AFTER_SEQUENCE_NUMBER 200") {
		t.Fatalf("calls %q, want iterators after each shard's acknowledged record", c)
	}
	// Records trimmed from the stream: the reader restarts at the horizon.
	f.mu.Lock()
	f.trimmed["s2"] = 500
	f.mu.Unlock()
	read(10, "500", "600", "700")
	if c := f.takeCalls(); !slices.Contains(c, "GetShardIterator s2 TRIM_HORIZON") {
		t.Fatalf("calls %q, want a TRIM_HORIZON iterator after the trim", c)
	}
	if err := r.AckFeed(ctx, "600"); err != nil {
		t.Fatal(err)
	}
	read(10, "700")
	// The closed shard, read to its end and acknowledged, is not read again.
	f.takeCalls()
	read(10, "700")
	for _, c := range f.takeCalls() {
		if strings.Contains(c, " s1") {
			t.Fatalf("closed, acknowledged shard read again: %q", c)
		}
	}
	if err := r.AckFeed(ctx, "0700"); err != nil {
		t.Fatal(err)
	}
	read(10)
	if err := r.AckFeed(ctx, "7x"); err == nil {
		t.Fatalf("AckFeed of a malformed sequence succeeded")
	}
	if _, err := r.ReadFeed(ctx, 0); err == nil {
		t.Fatalf("ReadFeed(0) succeeded")
	}
}
