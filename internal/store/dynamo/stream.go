package dynamo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// ---- record conversion ----

// Stream event names.
const (
	eventInsert = "INSERT"
	eventModify = "MODIFY"
	eventRemove = "REMOVE"
)

// ChangeFromStreamRecord converts one record of a DynamoDB stream event, as
// Lambda delivers it, into a store.Change: Seq is the record's
// SequenceNumber, Old and New are decoded from OldImage and NewImage with
// the adapter's attribute layout (an INSERT has no Old, a REMOVE no New).
// It returns an error wrapping ErrCorrupt when the record has no sequence
// number or event name, lacks an image its event needs (the stream must be
// NEW_AND_OLD_IMAGES), or holds an image that is not an item of the
// adapter's layout.
func ChangeFromStreamRecord(rec events.DynamoDBEventRecord) (store.Change, error) {
	keys, oldImg, newImg, err := convertImages(fromEventAV, rec.Change.Keys, rec.Change.OldImage, rec.Change.NewImage)
	if err != nil {
		return store.Change{}, err
	}
	ch, err := changeFromImages(rec.Change.SequenceNumber, rec.EventName, keys, oldImg, newImg)
	if err == nil && rec.Change.ApproximateCreationDateTime.Unix() > 0 {
		ch.At = rec.Change.ApproximateCreationDateTime.UTC()
	}
	if err == nil && rec.UserIdentity != nil {
		ch.Expired = ch.New == nil && isTTL(rec.UserIdentity.Type, rec.UserIdentity.PrincipalID)
	}
	return expiredOld(ch, err)
}

// The identity of a TTL deletion's REMOVE record ("Time to Live" in the
// DynamoDB Streams developer guide): the service itself.
const (
	ttlIdentityType      = "Service"
	ttlIdentityPrincipal = "dynamodb.amazonaws.com"
)

func isTTL(typ, principal string) bool {
	return typ == ttlIdentityType && principal == ttlIdentityPrincipal
}

// expiredOld drops the old image of a write over an item that had
// expired when it was written (TTL had not deleted it yet): to the feed
// it is the creation it is to the store, as on the embedded adapter.
func expiredOld(ch store.Change, err error) (store.Change, error) {
	if err == nil && ch.Old != nil && ch.New != nil && !ch.At.IsZero() && ch.Old.Expired(ch.At) {
		ch.Old = nil
	}
	return ch, err
}

// ChangeFromRecord converts one record returned by DynamoDB Streams'
// GetRecords into a store.Change, as ChangeFromStreamRecord does for Lambda's
// records, with the same error contract.
func ChangeFromRecord(rec streamtypes.Record) (store.Change, error) {
	if rec.Dynamodb == nil {
		return store.Change{}, corruptf("stream record has no dynamodb body")
	}
	keys, oldImg, newImg, err := convertImages(fromStreamAV, rec.Dynamodb.Keys, rec.Dynamodb.OldImage, rec.Dynamodb.NewImage)
	if err != nil {
		return store.Change{}, err
	}
	ch, err := changeFromImages(aws.ToString(rec.Dynamodb.SequenceNumber), string(rec.EventName), keys, oldImg, newImg)
	if err == nil && rec.Dynamodb.ApproximateCreationDateTime != nil && rec.Dynamodb.ApproximateCreationDateTime.Unix() > 0 {
		ch.At = rec.Dynamodb.ApproximateCreationDateTime.UTC()
	}
	if err == nil && rec.UserIdentity != nil {
		ch.Expired = ch.New == nil && isTTL(aws.ToString(rec.UserIdentity.Type), aws.ToString(rec.UserIdentity.PrincipalId))
	}
	return expiredOld(ch, err)
}

func changeFromImages(seq, event string, keys, oldImg, newImg map[string]types.AttributeValue) (store.Change, error) {
	if seq == "" || !isDecimal(seq) {
		return store.Change{}, corruptf("stream record has sequence number %q", seq)
	}
	ch := store.Change{Seq: seq}
	needOld, needNew := false, false
	switch event {
	case eventInsert:
		needNew = true
	case eventModify:
		needOld, needNew = true, true
	case eventRemove:
		needOld = true
	default:
		return store.Change{}, corruptf("stream record %s has event name %q", seq, event)
	}
	if needOld {
		if len(oldImg) == 0 {
			return store.Change{}, corruptf("stream record %s (%s) has no old image: the stream must be NEW_AND_OLD_IMAGES", seq, event)
		}
		it, err := decodeItem(oldImg)
		if err != nil {
			return store.Change{}, fmt.Errorf("stream record %s old image: %w", seq, err)
		}
		ch.Old = &it
		ch.Key = it.Key
	}
	if needNew {
		if len(newImg) == 0 {
			return store.Change{}, corruptf("stream record %s (%s) has no new image: the stream must be NEW_AND_OLD_IMAGES", seq, event)
		}
		it, err := decodeItem(newImg)
		if err != nil {
			return store.Change{}, fmt.Errorf("stream record %s new image: %w", seq, err)
		}
		ch.New = &it
		ch.Key = it.Key
	}
	if len(keys) > 0 {
		pk, err1 := getS(keys, attrPK, true)
		sk, err2 := getS(keys, attrSK, true)
		if err := errors.Join(err1, err2); err != nil {
			return store.Change{}, fmt.Errorf("stream record %s keys: %w", seq, err)
		}
		if k := (store.Key{PK: pk, SK: sk}); k != ch.Key {
			return store.Change{}, corruptf("stream record %s: keys %s differ from the image's %s", seq, k, ch.Key)
		}
	}
	return ch, nil
}

// Lambda's events package and the DynamoDB Streams client each have their
// own attribute value types, identical in content to the DynamoDB client's;
// fromEventAV and fromStreamAV convert one value of each, and the generic
// helpers below the images and lists made of them.

// convertImages converts a record's key, old and new images with conv.
func convertImages[V any](conv func(V) (types.AttributeValue, error), keys, old, new map[string]V) (k, o, n map[string]types.AttributeValue, err error) {
	if k, err = convertImage(keys, conv); err != nil {
		return nil, nil, nil, err
	}
	if o, err = convertImage(old, conv); err != nil {
		return nil, nil, nil, err
	}
	if n, err = convertImage(new, conv); err != nil {
		return nil, nil, nil, err
	}
	return k, o, n, nil
}

// convertImage converts an image (nil when it is empty) with conv, naming
// the attribute whose value does not convert.
func convertImage[V any](m map[string]V, conv func(V) (types.AttributeValue, error)) (map[string]types.AttributeValue, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for name, v := range m {
		av, err := conv(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		out[name] = av
	}
	return out, nil
}

// convertList converts a list attribute's values with conv.
func convertList[V any](l []V, conv func(V) (types.AttributeValue, error)) (types.AttributeValue, error) {
	out := make([]types.AttributeValue, len(l))
	for i, e := range l {
		av, err := conv(e)
		if err != nil {
			return nil, err
		}
		out[i] = av
	}
	return &types.AttributeValueMemberL{Value: out}, nil
}

// convertMap converts a map attribute's values with conv (an empty map
// stays a map).
func convertMap[V any](m map[string]V, conv func(V) (types.AttributeValue, error)) (types.AttributeValue, error) {
	out, err := convertImage(m, conv)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]types.AttributeValue{}
	}
	return &types.AttributeValueMemberM{Value: out}, nil
}

// fromEventAV converts one Lambda attribute value. The events package's
// accessors panic on a type mismatch, so each is called only for its own
// DataType.
func fromEventAV(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		return convertList(v.List(), fromEventAV)
	case events.DataTypeMap:
		return convertMap(v.Map(), fromEventAV)
	default:
		return nil, corruptf("unknown attribute data type %v", v.DataType())
	}
}

// fromStreamAV converts one DynamoDB Streams attribute value.
func fromStreamAV(v streamtypes.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberL:
		return convertList(v.Value, fromStreamAV)
	case *streamtypes.AttributeValueMemberM:
		return convertMap(v.Value, fromStreamAV)
	default:
		return nil, corruptf("unknown attribute value %T", v)
	}
}

// ---- sequence numbers ----

// isDecimal reports whether s is a non-empty string of ASCII digits.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// seqLess orders decimal sequence numbers of any length; "" is below all.
func seqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
