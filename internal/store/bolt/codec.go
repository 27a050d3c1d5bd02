package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("bolt: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}

// checkKey validates a table or index key against the size limits.
func checkKey(k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return fmt.Errorf("bolt: %w", err)
	}
	return nil
}

// ---- key encoding ----

// appendEscapedBody appends s with every 0x00 written as 0x00 0xFF. The
// escaping maps byte order onto byte order and never produces 0x00 0x01.
func appendEscapedBody(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xFF)
		s = s[i+1:]
	}
}

// appendEscaped appends s escaped and terminated by 0x00 0x01, which sorts
// below any continuation, so shorter strings sort first as in string order.
func appendEscaped(dst []byte, s string) []byte {
	return append(appendEscapedBody(dst, s), 0x00, 0x01)
}

// tableKey encodes a table key: esc(PK) SK.
func tableKey(dst []byte, k store.Key) []byte {
	return append(appendEscaped(dst, k.PK), k.SK...)
}

// indexKey encodes an index entry key: esc(indexPK) esc(indexSK) esc(PK) SK.
func indexKey(dst []byte, ixk store.IndexKey, k store.Key) []byte {
	dst = appendEscaped(dst, ixk.PK)
	dst = appendEscaped(dst, ixk.SK)
	return tableKey(dst, k)
}

// successor returns the smallest key greater than every key beginning with
// p, or nil when there is none (p is all 0xFF).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for len(s) > 0 && s[len(s)-1] == 0xFF {
		s = s[:len(s)-1]
	}
	if len(s) == 0 {
		return nil
	}
	s[len(s)-1]++
	return s
}

// clip returns b with its capacity cut to its length, so appends copy.
func clip(b []byte) []byte { return b[:len(b):len(b)] }

// ---- value encoding ----
//
// item:   0x01 uvarint(version) str(type) str(pk) str(sk) uvarint(n)
//         n × (str(index name) str(indexPK) str(indexSK)) data...
//         or, for an item that expires, 0x02 uvarint(version)
//         uvarint(expiresAt) and the rest as in 0x01
// change: 0x01 byte(flags: 1 old, 2 new) [uvarint(len(old)) old] [new]
//         or, with its commit time, 0x02 byte(flags) varint(unix nanoseconds) [...] [new]
// where str(s) is uvarint(len(s)) s.

const formatV1 = 0x01

// formatItemExpiring is an item with an ExpiresAt.
const formatItemExpiring = 0x02

// formatChangeV2 is a change that carries its commit time.
const formatChangeV2 = 0x02

func appendStr(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func encodeItem(it *store.Item, version int64) []byte {
	n := 1 + 10 + 3*5 + len(it.Type) + len(it.PK) + len(it.SK) + 1 + len(it.Data)
	for name, k := range it.Index {
		n += 3*5 + len(name) + len(k.PK) + len(k.SK)
	}
	b := make([]byte, 0, n+10)
	if it.ExpiresAt > 0 {
		b = append(b, formatItemExpiring)
		b = binary.AppendUvarint(b, uint64(version))
		b = binary.AppendUvarint(b, uint64(it.ExpiresAt))
	} else {
		b = append(b, formatV1)
		b = binary.AppendUvarint(b, uint64(version))
	}
	b = appendStr(b, it.Type)
	b = appendStr(b, it.PK)
	b = appendStr(b, it.SK)
	b = binary.AppendUvarint(b, uint64(len(it.Index)))
	for _, name := range keyedNames { // a fixed order
		if k, ok := it.Index[name]; ok {
			b = appendStr(b, string(name))
			b = appendStr(b, k.PK)
			b = appendStr(b, k.SK)
		}
	}
	return append(b, it.Data...)
}

// maxIndexes bounds the number of global indexes (store.Indexes).
const maxIndexes = 8

func init() {
	if len(indexNames) > maxIndexes {
		panic("bolt: more global indexes than maxIndexes")
	}
}

// rawHead is the part of an encoded item that a commit needs, without
// copying: the version and, per index slot, the item's index key as
// sub-slices of the encoded item (nil pk where it has none).
type rawHead struct {
	version   int64
	expiresAt int64
	index     [maxIndexes]struct{ pk, sk []byte }
}

// decodeRawHead decodes the head of raw into h; its slices alias raw.
func decodeRawHead(raw []byte, h *rawHead) error {
	d := decoder{b: raw}
	h.version, h.expiresAt = d.versionAndExpiry()
	if d.err {
		return fmt.Errorf("%w: unknown item format", ErrCorrupt)
	}
	d.rawStr()
	d.rawStr()
	d.rawStr()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	for range n {
		name, pk, sk := d.rawStr(), d.rawStr(), d.rawStr()
		if d.err {
			return fmt.Errorf("%w: truncated item", ErrCorrupt)
		}
		if len(pk) == 0 {
			continue
		}
		for slot, known := range indexNames {
			if string(name) == string(known) {
				h.index[slot].pk, h.index[slot].sk = pk, sk
				break
			}
		}
	}
	return nil
}

// rawIndexKey encodes an index entry key, esc(indexPK) esc(indexSK) tk,
// from the raw parts of an index key and an encoded table key.
func rawIndexKey(k struct{ pk, sk []byte }, tk []byte) []byte {
	dst := make([]byte, 0, len(k.pk)+len(k.sk)+len(tk)+8)
	dst = appendEscapedRaw(dst, k.pk)
	dst = appendEscapedRaw(dst, k.sk)
	return append(dst, tk...)
}

// appendEscapedRaw is appendEscaped for bytes.
func appendEscapedRaw(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			dst = append(dst, s...)
			return append(dst, 0x00, 0x01)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xFF)
		s = s[i+1:]
	}
}

// versionAndExpiry decodes an item's format byte, version and expiry
// (zero for an item that does not expire); an unknown format sets d.err.
func (d *decoder) versionAndExpiry() (version, expiresAt int64) {
	switch d.byte1() {
	case formatV1:
		return int64(d.uvarint()), 0
	case formatItemExpiring:
		version = int64(d.uvarint())
		return version, int64(d.uvarint())
	}
	d.err = true
	return 0, 0
}

// itemExpiresAt returns the ExpiresAt of an encoded item (zero when it
// does not expire or cannot be decoded).
func itemExpiresAt(raw []byte) int64 {
	d := decoder{b: raw}
	_, exp := d.versionAndExpiry()
	return exp
}

// head is the part of an encoded item that a commit needs.
type head struct {
	version int64
	index   []indexEntry
}

type indexEntry struct {
	name store.IndexName
	key  store.IndexKey
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// rawStr is str without copying: the bytes alias the decoder's input.
func (d *decoder) rawStr() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeItemParts decodes raw into it (when non-nil) and h.
func decodeItemParts(raw []byte, it *store.Item, h *head) error {
	d := decoder{b: raw}
	var expiresAt int64
	h.version, expiresAt = d.versionAndExpiry()
	if d.err {
		return fmt.Errorf("%w: unknown item format", ErrCorrupt)
	}
	typ, pk, sk := d.str(), d.str(), d.str()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	h.index = make([]indexEntry, 0, n)
	for range n {
		e := indexEntry{name: store.IndexName(d.str()), key: store.IndexKey{PK: d.str(), SK: d.str()}}
		if d.err {
			return fmt.Errorf("%w: truncated item", ErrCorrupt)
		}
		h.index = append(h.index, e)
	}
	if d.err {
		return fmt.Errorf("%w: truncated item", ErrCorrupt)
	}
	if it != nil {
		*it = store.Item{Key: store.Key{PK: pk, SK: sk}, Type: typ, Version: h.version, ExpiresAt: expiresAt}
		if n > 0 {
			it.Index = make(map[store.IndexName]store.IndexKey, n)
			for _, e := range h.index {
				it.Index[e.name] = e.key
			}
		}
		if len(d.b) > 0 {
			it.Data = bytes.Clone(d.b)
		}
	}
	return nil
}

// decodeItem decodes raw into an Item that owns its memory.
func decodeItem(raw []byte) (store.Item, error) {
	var it store.Item
	var h head
	err := decodeItemParts(raw, &it, &h)
	return it, err
}

func encodeChange(old, new []byte, at time.Time) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(old)+len(new))
	if at.IsZero() {
		b = append(b, formatV1)
	} else {
		b = append(b, formatChangeV2)
	}
	var flags byte
	if old != nil {
		flags |= 1
	}
	if new != nil {
		flags |= 2
	}
	b = append(b, flags)
	if !at.IsZero() {
		b = binary.AppendVarint(b, at.UnixNano())
	}
	if old != nil {
		b = binary.AppendUvarint(b, uint64(len(old)))
		b = append(b, old...)
	}
	return append(b, new...)
}

func decodeChange(raw []byte) (store.Change, error) {
	d := decoder{b: raw}
	format, flags := d.byte1(), d.byte1()
	if d.err || format != formatV1 && format != formatChangeV2 || flags == 0 || flags > 3 {
		return store.Change{}, fmt.Errorf("%w: bad change header", ErrCorrupt)
	}
	var ch store.Change
	if format == formatChangeV2 {
		ns, n := binary.Varint(d.b)
		if n <= 0 {
			return store.Change{}, fmt.Errorf("%w: bad change time", ErrCorrupt)
		}
		d.b = d.b[n:]
		ch.At = time.Unix(0, ns).UTC()
	}
	if flags&1 != 0 {
		n := d.uvarint()
		if d.err || n > uint64(len(d.b)) {
			return store.Change{}, fmt.Errorf("%w: truncated change", ErrCorrupt)
		}
		old, err := decodeItem(d.b[:n])
		if err != nil {
			return store.Change{}, err
		}
		d.b = d.b[n:]
		ch.Old = &old
		ch.Key = old.Key
	}
	if flags&2 != 0 {
		nw, err := decodeItem(d.b)
		if err != nil {
			return store.Change{}, err
		}
		ch.New = &nw
		ch.Key = nw.Key
	}
	return ch, nil
}
