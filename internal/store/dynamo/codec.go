package dynamo

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of an item in the table.
const (
	attrPK      = "pk"
	attrSK      = "sk"
	attrType    = "type"
	attrVersion = "version"
	attrData    = "data"
	// attrDataDeflate holds the data compressed (raw DEFLATE, RFC 1951)
	// instead of attrData, when that is smaller: DynamoDB charges a write
	// unit per 1 KB of item, and a record's JSON compresses to about half.
	attrDataDeflate = "dataz"
	// attrWriteToken holds 8 random bytes of the conditional PutItem that
	// last wrote the item (see Store.Commit): how a retried call whose
	// earlier attempt was applied recognises its own write. Readers ignore
	// it.
	attrWriteToken = "wt"
	// attrExpiresAt is the item's ExpiresAt in Unix seconds, the table's
	// TTL attribute (absent: the item does not expire).
	attrExpiresAt = "expiresAt"
)

// compressFrom is the smallest data worth compressing: below it an item
// fits in one write unit anyway.
const compressFrom = 512

// deflate returns data compressed, or nil when that is not smaller.
func deflate(data []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return nil
	}
	if _, err := w.Write(data); err != nil || w.Close() != nil || buf.Len() >= len(data) {
		return nil
	}
	return buf.Bytes()
}

// inflate decompresses data, refusing more than store.MaxItemBytes.
func inflate(z []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(z))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, store.MaxItemBytes+1))
	if err != nil || len(out) > store.MaxItemBytes {
		return nil, errors.New("undecodable")
	}
	return out, nil
}

// indexNames are the indexes the adapter maintains: store.Indexes as it was
// at start-up. A slot is a position in it.
var indexNames = slices.Clone(store.Indexes)

// indexSlot returns the slot of name, or -1 for an unknown index.
func indexSlot(name store.IndexName) int { return slices.Index(indexNames, name) }

// keyedNames are the index names whose keys an item stores as attributes:
// the global indexes (each also a GSI) and the lookup indexes (stored only;
// their entries are items of their own, see store.Lookups).
var keyedNames = append(slices.Clone(store.Indexes), store.Lookups...)

// knownIndex reports whether an item may carry a key for name.
func knownIndex(name store.IndexName) bool { return slices.Contains(keyedNames, name) }

// indexPKAttr and indexSKAttr name the key attributes of index name, which
// are also the key attributes of the GSI of the same name.
func indexPKAttr(name store.IndexName) string { return string(name) + "_pk" }
func indexSKAttr(name store.IndexName) string { return string(name) + "_sk" }

// attrS returns a string attribute value.
func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// attrN returns a number attribute value.
func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// keyAttrs returns the table key of k as attributes.
func keyAttrs(k store.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: attrS(k.PK), attrSK: attrS(k.SK)}
}

// itemAttrs encodes it, at version, as a full set of item attributes. Type
// and data are omitted when empty, and each index pair when the item is
// absent from that index (sparse GSIs).
func itemAttrs(it *store.Item, version int64) map[string]types.AttributeValue {
	return encodeAttrs(it, version, true)
}

// encodeAttrs is itemAttrs, with the data compressed when compress is set
// and that makes it smaller (attrDataDeflate).
func encodeAttrs(it *store.Item, version int64, compress bool) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:      attrS(it.PK),
		attrSK:      attrS(it.SK),
		attrVersion: attrN(version),
	}
	if it.Type != "" {
		m[attrType] = attrS(it.Type)
	}
	if it.ExpiresAt > 0 {
		m[attrExpiresAt] = attrN(it.ExpiresAt)
	}
	var z []byte
	if compress && len(it.Data) >= compressFrom {
		z = deflate(it.Data)
	}
	switch {
	case z != nil:
		m[attrDataDeflate] = &types.AttributeValueMemberB{Value: z}
	case len(it.Data) > 0:
		m[attrData] = &types.AttributeValueMemberB{Value: bytes.Clone(it.Data)}
	}
	for _, name := range keyedNames {
		if k := it.Index[name]; !k.IsZero() {
			m[indexPKAttr(name)] = attrS(k.PK)
			m[indexSKAttr(name)] = attrS(k.SK)
		}
	}
	return m
}

// decodeItem decodes the attributes of a table item. It returns an error
// wrapping ErrCorrupt when a required attribute is missing or of the wrong
// type; attributes it does not know are ignored.
func decodeItem(m map[string]types.AttributeValue) (store.Item, error) {
	var it store.Item
	var err error
	if it.PK, err = getS(m, attrPK, true); err != nil {
		return store.Item{}, err
	}
	if it.SK, err = getS(m, attrSK, true); err != nil {
		return store.Item{}, err
	}
	if it.Type, err = getS(m, attrType, false); err != nil {
		return store.Item{}, err
	}
	switch v := m[attrVersion].(type) {
	case nil:
		return store.Item{}, corruptf("item %s has no %s attribute", it.Key, attrVersion)
	case *types.AttributeValueMemberN:
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil || n < 1 {
			return store.Item{}, corruptf("item %s has version %q", it.Key, v.Value)
		}
		it.Version = n
	default:
		return store.Item{}, corruptf("item %s: attribute %s is %T, want N", it.Key, attrVersion, v)
	}
	switch v := m[attrExpiresAt].(type) {
	case nil:
	case *types.AttributeValueMemberN:
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil || n < 0 {
			return store.Item{}, corruptf("item %s has %s %q", it.Key, attrExpiresAt, v.Value)
		}
		it.ExpiresAt = n
	default:
		return store.Item{}, corruptf("item %s: attribute %s is %T, want N", it.Key, attrExpiresAt, v)
	}
	switch v := m[attrData].(type) {
	case nil:
	case *types.AttributeValueMemberB:
		if len(v.Value) > 0 {
			it.Data = bytes.Clone(v.Value)
		}
	default:
		return store.Item{}, corruptf("item %s: attribute %s is %T, want B", it.Key, attrData, v)
	}
	switch v := m[attrDataDeflate].(type) {
	case nil:
	case *types.AttributeValueMemberB:
		if it.Data != nil {
			return store.Item{}, corruptf("item %s has both %s and %s", it.Key, attrData, attrDataDeflate)
		}
		data, err := inflate(v.Value)
		if err != nil {
			return store.Item{}, corruptf("item %s: attribute %s does not inflate", it.Key, attrDataDeflate)
		}
		if len(data) > 0 {
			it.Data = data
		}
	default:
		return store.Item{}, corruptf("item %s: attribute %s is %T, want B", it.Key, attrDataDeflate, v)
	}
	for _, name := range keyedNames {
		pk, err := getS(m, indexPKAttr(name), false)
		if err != nil {
			return store.Item{}, err
		}
		sk, err := getS(m, indexSKAttr(name), false)
		if err != nil {
			return store.Item{}, err
		}
		if pk == "" {
			continue
		}
		if it.Index == nil {
			it.Index = make(map[store.IndexName]store.IndexKey, len(keyedNames))
		}
		it.Index[name] = store.IndexKey{PK: pk, SK: sk}
	}
	return it, nil
}

// getS returns string attribute name of m, "" when it is absent and not
// required.
func getS(m map[string]types.AttributeValue, name string, required bool) (string, error) {
	switch v := m[name].(type) {
	case nil:
		if required {
			return "", corruptf("item has no %s attribute", name)
		}
		return "", nil
	case *types.AttributeValueMemberS:
		return v.Value, nil
	default:
		return "", corruptf("attribute %s is %T, want S", name, v)
	}
}

// itemSize estimates the size DynamoDB charges for an item: attribute names
// plus values, numbers at their decimal length.
func itemSize(m map[string]types.AttributeValue) int {
	n := 0
	for name, v := range m {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)/2 + 2
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		default:
			n += 8
		}
	}
	return n
}

// ---- pagination tokens ----

// encodeToken returns the opaque Next token for a page that ended at it: the
// LastEvaluatedKey DynamoDB would resume after (the table key, plus the index
// key for an index query), as base64url JSON of its string attributes.
func encodeToken(it store.Item, index store.IndexName) string {
	m := map[string]string{attrPK: it.PK, attrSK: it.SK}
	if index != "" {
		k := it.Index[index]
		m[indexPKAttr(index)] = k.PK
		m[indexSKAttr(index)] = k.SK
	}
	b, err := json.Marshal(m)
	if err != nil {
		// A map of strings always marshals; keep the contract of never
		// panicking anyway.
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken decodes an After token of a query of partition pk in index
// (empty for the table) into an ExclusiveStartKey. It returns an error
// wrapping store.ErrInvalid when the token is malformed or was not issued for
// that partition and index.
func decodeToken(tok string, index store.IndexName, pk string) (map[string]types.AttributeValue, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, invalidf("malformed After token")
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalidf("malformed After token")
	}
	want := []string{attrPK, attrSK}
	partition := attrPK
	if index != "" {
		want = append(want, indexPKAttr(index), indexSKAttr(index))
		partition = indexPKAttr(index)
	}
	if len(m) != len(want) || m[partition] != pk {
		return nil, invalidf("malformed After token")
	}
	key := make(map[string]types.AttributeValue, len(want))
	for _, name := range want {
		v, ok := m[name]
		if !ok || v == "" || !utf8.ValidString(v) {
			return nil, invalidf("malformed After token")
		}
		key[name] = attrS(v)
	}
	return key, nil
}

// ---- errors ----

func invalidf(format string, args ...any) error {
	return fmt.Errorf("dynamo: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("dynamo: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}
