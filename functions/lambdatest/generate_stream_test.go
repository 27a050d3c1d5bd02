package lambdatest

// The sample stream records of the generated events: a table's stream
// read with GetRecords and converted to the Lambda event's shape.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// readStream returns every record of the table's stream, in order.
func readStream(t testing.TB, rt *awsrt.Runtime, table string) []streamtypes.Record {
	t.Helper()
	ctx := context.Background()
	arn, err := dynamo.StreamARN(ctx, rt.DynamoDB, table)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := rt.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []streamtypes.Record
	for _, sh := range desc.StreamDescription.Shards {
		it, err := rt.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			page, err := rt.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Records...)
			if len(page.Records) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	slices.SortStableFunc(out, func(a, b streamtypes.Record) int {
		x, y := aws.ToString(a.Dynamodb.SequenceNumber), aws.ToString(b.Dynamodb.SequenceNumber)
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
	return out
}

// streamARN is the event source ARN the sample records carry: the stream
// of a table named clockwork.
const streamARN = "arn:aws:dynamodb:us-east-1:123456789012:table/clockwork/stream/2026-11-30T10:00:00.000"

// toEventRecord converts a DynamoDB Streams record into the record of a
// Lambda DynamoDB event.
func toEventRecord(t testing.TB, r streamtypes.Record) events.DynamoDBEventRecord {
	t.Helper()
	d := r.Dynamodb
	img := func(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]events.DynamoDBAttributeValue, len(m))
		for k, v := range m {
			out[k] = toEventAV(t, v)
		}
		return out
	}
	rec := events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: "aws:dynamodb", EventVersion: "1.1", EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			Keys: img(d.Keys), NewImage: img(d.NewImage), OldImage: img(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		},
	}
	if d.ApproximateCreationDateTime != nil {
		rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: d.ApproximateCreationDateTime.Truncate(time.Second)}
	}
	if rec.EventVersion == "" || rec.Change.StreamViewType == "" {
		t.Fatalf("stream record %+v lacks fields", r)
	}
	return rec
}

func toEventAV(t testing.TB, v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	t.Helper()
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = toEventAV(t, e)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberM:
		m := make(map[string]events.DynamoDBAttributeValue, len(v.Value))
		for k, e := range v.Value {
			m[k] = toEventAV(t, e)
		}
		return events.NewMapAttribute(m)
	}
	t.Fatalf("attribute value %T is not used by the table layout", v)
	return events.DynamoDBAttributeValue{}
}
