package awsrt

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestStreamBatchStopsBeforeTheDeadline: with less than streamMargin left,
// the stream handler processes the record it is on and reports the next
// as the batch's first failure, so Lambda hands the rest back instead of
// the function being cut off mid-record.
func TestStreamBatchStopsBeforeTheDeadline(t *testing.T) {
	rt := newRuntime(t, nil)
	raw, err := os.ReadFile("../../events/stream/04-agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("sample event: %v", err)
	}
	second := ev.Records[0]
	second.Change.SequenceNumber += "9"
	ev.Records = append(ev.Records, second)

	ctx, cancel := context.WithTimeout(context.Background(), streamMargin-5*time.Second)
	defer cancel()
	resp, err := rt.HandleStream(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != second.Change.SequenceNumber {
		t.Fatalf("near the deadline: %+v, %v; want the second record handed back", resp, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := rt.HandleStream(ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("with time left: %+v, %v", resp, err)
	}
}
