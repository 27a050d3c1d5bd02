package dynamo_test

// The stream side of the adapter: records converted as Lambda delivers
// them, and the stream reader's checkpoint.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-lambda-go/events"
)

func TestChangeFromStreamRecord(t *testing.T) {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal([]byte(lambdaEvent), &ev); err != nil {
		t.Fatal(err)
	}
	ch, err := dynamo.ChangeFromStreamRecord(ev.Records[0])
	if err != nil {
		t.Fatalf("MODIFY: %v", err)
	}
	k := store.Key{PK: "A#agent", SK: "E#e1"}
	if ch.Seq != "4421584500000000017450439091" || ch.Key != k || ch.Type() != "expectation" || ch.Old == nil || ch.New == nil {
		t.Fatalf("MODIFY change = %+v", ch)
	}
	if ch.Old.Version != 3 || string(ch.Old.Data) != `{"state":"open"}` || ch.Old.Index[store.GSI1] != (store.IndexKey{PK: "FK#agent#k", SK: "e1"}) {
		t.Fatalf("old image = %+v (%s)", *ch.Old, ch.Old.Data)
	}
	if ch.New.Version != 4 || string(ch.New.Data) != `{"state":"met"}` || !ch.New.Index[store.GSI1].IsZero() ||
		ch.New.Index[store.GSI2] != (store.IndexKey{PK: "SU#agent#t#1", SK: "met#e1"}) {
		t.Fatalf("new image = %+v (%s)", *ch.New, ch.New.Data)
	}
	ch, err = dynamo.ChangeFromStreamRecord(ev.Records[1])
	if err != nil || ch.New != nil || ch.Old == nil || ch.Old.Type != "subject" || ch.Old.Data != nil || ch.Key.SK != "S#t#1" {
		t.Fatalf("REMOVE change = %+v, %v", ch, err)
	}

	// Records the adapter cannot use are errors, never panics.
	broken := func(edit func(r *events.DynamoDBEventRecord)) error {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal([]byte(lambdaEvent), &ev); err != nil {
			t.Fatal(err)
		}
		edit(&ev.Records[0])
		_, err := dynamo.ChangeFromStreamRecord(ev.Records[0])
		return err
	}
	for name, edit := range map[string]func(r *events.DynamoDBEventRecord){
		"keys only stream": func(r *events.DynamoDBEventRecord) { r.Change.OldImage, r.Change.NewImage = nil, nil },
		"version as string": func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["version"] = events.NewStringAttribute("4")
		},
		"data as string": func(r *events.DynamoDBEventRecord) {
			r.Change.NewImage["data"] = events.NewStringAttribute("x")
		},
		"pk as number":   func(r *events.DynamoDBEventRecord) { r.Change.OldImage["pk"] = events.NewNumberAttribute("1") },
		"no sequence":    func(r *events.DynamoDBEventRecord) { r.Change.SequenceNumber = "" },
		"unknown event":  func(r *events.DynamoDBEventRecord) { r.EventName = "UPSERT" },
		"keys disagree":  func(r *events.DynamoDBEventRecord) { r.Change.Keys["sk"] = events.NewStringAttribute("E#e2") },
		"missing pk":     func(r *events.DynamoDBEventRecord) { delete(r.Change.NewImage, "pk") },
		"version absent": func(r *events.DynamoDBEventRecord) { delete(r.Change.OldImage, "version") },
	} {
		if err := broken(edit); !errors.Is(err, dynamo.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestStreamRecordsMatchLambda checks that a record read by the stream
// reader and the same record in Lambda's JSON convert alike.
func TestStreamRecordsMatchLambda(t *testing.T) {
	s := newFeedStore(t).(feedStore)
	it := item("p", "a", `{"x":"é"}`)
	it.Index = map[store.IndexName]store.IndexKey{store.GSI5: {PK: "OUTBOX", SK: "2026#a"}}
	mustCommit(t, s, store.PutIfAbsent(it))
	chs, err := s.ReadFeed(ctxT(t), 10)
	if err != nil || len(chs) != 1 {
		t.Fatalf("ReadFeed = %v, %v", chs, err)
	}
	raw := fmt.Sprintf(`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"p"},"sk":{"S":"a"}},"NewImage":{"pk":{"S":"p"},"sk":{"S":"a"},"type":{"S":"test"},"version":{"N":"1"},"data":{"B":"eyJ4Ijoiw6kifQ=="},"gsi5_pk":{"S":"OUTBOX"},"gsi5_sk":{"S":"2026#a"}},"SequenceNumber":%q}}`, chs[0].Seq)
	var rec events.DynamoDBEventRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		t.Fatal(err)
	}
	fromLambda, err := dynamo.ChangeFromStreamRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	a, b := chs[0], fromLambda
	if a.Seq != b.Seq || a.Key != b.Key || a.Old != nil || b.Old != nil || !bytes.Equal(a.New.Data, b.New.Data) ||
		a.New.Version != b.New.Version || a.New.Index[store.GSI5] != b.New.Index[store.GSI5] || a.New.Type != b.New.Type {
		t.Fatalf("stream reader %+v %+v, Lambda %+v %+v", a, *a.New, b, *b.New)
	}
}

// A reader with a checkpoint file resumes after what was acknowledged, as
// a Lambda event source mapping does after a restart; what was read but
// not acknowledged is read again, and a checkpoint of another stream is
// ignored (a replay, never a skip).
func TestStreamCheckpoint(t *testing.T) {
	db, st := clients(t)
	ctx := ctxT(t)
	table := dynamotest.NewTable(t, db, "checkpoint-")
	s := dynamo.New(db, table)
	for i := range 6 {
		it := item("p", fmt.Sprintf("k%d", i), `{}`)
		mustCommit(t, s, store.Write{Put: &it})
	}
	arn, err := dynamo.StreamARN(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "checkpoint.json")
	opts := dynamo.StreamOptions{Checkpoint: cp}
	// One ReadFeed: without an acknowledgement the next would return the
	// same changes again.
	read := func(r *dynamo.StreamReader) []store.Change {
		t.Helper()
		chs, err := r.ReadFeed(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		return chs
	}

	first := dynamo.NewStreamReader(st, arn, opts)
	chs := read(first)
	if len(chs) != 6 {
		t.Fatalf("first reader: %d changes, want 6", len(chs))
	}
	if err := first.AckFeed(ctx, chs[3].Seq); err != nil { // the first four
		t.Fatal(err)
	}
	_ = first.Close() // "killed": the last two were read, not acknowledged

	second := dynamo.NewStreamReader(st, arn, opts)
	defer second.Close()
	again := read(second)
	if len(again) != 2 || again[0].Seq != chs[4].Seq || again[1].Seq != chs[5].Seq {
		t.Fatalf("resumed reader read %d changes (%v), want the two unacknowledged", len(again), again)
	}

	foreign := dynamo.NewStreamReader(st, arn+"-other", dynamo.StreamOptions{Checkpoint: cp})
	_ = foreign.Close()
	if err := os.WriteFile(cp, []byte(`{"streamArn":"`+arn+`-old","acked":"99999999999999999999999"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := dynamo.NewStreamReader(st, arn, opts)
	defer fresh.Close()
	if n := len(read(fresh)); n != 6 {
		t.Fatalf("with another stream's checkpoint: %d changes, want all 6 again", n)
	}
}
