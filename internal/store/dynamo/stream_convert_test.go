package dynamo

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TestAttributeConversion converts one image holding every attribute type,
// nested in a list and a map, from Lambda's and from DynamoDB Streams'
// types, and expects DynamoDB's values for both.
func TestAttributeConversion(t *testing.T) {
	want := map[string]types.AttributeValue{
		"s":   &types.AttributeValueMemberS{Value: "x"},
		"n":   &types.AttributeValueMemberN{Value: "12"},
		"b":   &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"t":   &types.AttributeValueMemberBOOL{Value: true},
		"nul": &types.AttributeValueMemberNULL{Value: true},
		"ss":  &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":  &types.AttributeValueMemberNS{Value: []string{"1"}},
		"bs":  &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "in list"},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "7"}}},
		}},
	}
	lambda := map[string]events.DynamoDBAttributeValue{
		"s":   events.NewStringAttribute("x"),
		"n":   events.NewNumberAttribute("12"),
		"b":   events.NewBinaryAttribute([]byte{1, 2}),
		"t":   events.NewBooleanAttribute(true),
		"nul": events.NewNullAttribute(),
		"ss":  events.NewStringSetAttribute([]string{"a", "b"}),
		"ns":  events.NewNumberSetAttribute([]string{"1"}),
		"bs":  events.NewBinarySetAttribute([][]byte{{3}}),
		"l": events.NewListAttribute([]events.DynamoDBAttributeValue{
			events.NewStringAttribute("in list"),
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
		}),
		"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"inner": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewNumberAttribute("7")}),
		}),
	}
	streams := map[string]streamtypes.AttributeValue{
		"s":   &streamtypes.AttributeValueMemberS{Value: "x"},
		"n":   &streamtypes.AttributeValueMemberN{Value: "12"},
		"b":   &streamtypes.AttributeValueMemberB{Value: []byte{1, 2}},
		"t":   &streamtypes.AttributeValueMemberBOOL{Value: true},
		"nul": &streamtypes.AttributeValueMemberNULL{Value: true},
		"ss":  &streamtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":  &streamtypes.AttributeValueMemberNS{Value: []string{"1"}},
		"bs":  &streamtypes.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l": &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{
			&streamtypes.AttributeValueMemberS{Value: "in list"},
			&streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{}},
		}},
		"m": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{
			"inner": &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{&streamtypes.AttributeValueMemberN{Value: "7"}}},
		}},
	}
	k, o, n, err := convertImages(fromEventAV, lambda, nil, lambda)
	if err != nil || k == nil || o != nil || !reflect.DeepEqual(n, want) || !reflect.DeepEqual(k, want) {
		t.Errorf("from Lambda's types: %v, old %v, new %#v", err, o, n)
	}
	k, o, n, err = convertImages(fromStreamAV, streams, nil, streams)
	if err != nil || k == nil || o != nil || !reflect.DeepEqual(n, want) || !reflect.DeepEqual(k, want) {
		t.Errorf("from DynamoDB Streams' types: %v, old %v, new %#v", err, o, n)
	}
	// A value of no known type names its attribute.
	bad := map[string]streamtypes.AttributeValue{"m": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{"x": nil}}}
	if _, _, _, err := convertImages(fromStreamAV, nil, bad, nil); err == nil {
		t.Error("a nil attribute value converted")
	}
}

// TestTTLRecordFromLambda: a REMOVE record that Time to Live made, as
// Lambda delivers it (the developer guide's example: "userIdentity":
// {"type": "Service", "principalId": "dynamodb.amazonaws.com"}), is a
// Change marked Expired; a REMOVE without that identity, or by another
// principal, is a caller's delete; a write over an item that had expired
// when it was made has no old image.
func TestTTLRecordFromLambda(t *testing.T) {
	const image = `{"pk":{"S":"p"},"sk":{"S":"s"},"type":{"S":"rec"},"version":{"N":"2"},"expiresAt":{"N":"1700000000"}}`
	record := func(event, identity, newImage string) events.DynamoDBEventRecord {
		raw := `{"eventName":"` + event + `","dynamodb":{"ApproximateCreationDateTime":1800000000,"Keys":{"pk":{"S":"p"},"sk":{"S":"s"}},` +
			`"OldImage":` + image + newImage + `,"SequenceNumber":"111","StreamViewType":"NEW_AND_OLD_IMAGES"}` + identity + `}`
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ttl := `,"userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"}`
	for _, tc := range []struct {
		name     string
		rec      events.DynamoDBEventRecord
		expired  bool
		keepsOld bool
	}{
		{"TTL deletion", record("REMOVE", ttl, ""), true, true},
		{"caller's delete", record("REMOVE", "", ""), false, true},
		{"another service", record("REMOVE", `,"userIdentity":{"type":"Service","principalId":"example.amazonaws.com"}`, ""), false, true},
		{"write over an expired item", record("MODIFY", "", `,"NewImage":{"pk":{"S":"p"},"sk":{"S":"s"},"type":{"S":"rec"},"version":{"N":"1"}}`), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := ChangeFromStreamRecord(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Expired != tc.expired || (ch.Old != nil) != tc.keepsOld {
				t.Fatalf("Expired %v, old image %v; want %v, %v", ch.Expired, ch.Old != nil, tc.expired, tc.keepsOld)
			}
		})
	}
}
