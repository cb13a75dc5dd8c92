package zookeeper

import (
	"encoding/binary"
	"time"
)

// nodeData is what a queue node stores: the holder's label, the session
// timeout of the session that made it (an upper bound of the time the lock
// outlives its holder), the key's limit (its number of permits), and the
// holder's published value.
//
// Nodes made before values existed store the label alone, as raw bytes.
// Nodes made now store dataMark, dataVersion, the timeout in milliseconds
// and the label's length (uvarints), the label, then the value. A node of
// an N-permit lock (limit above 1) stores dataVersionLimit instead, and the
// limit (uvarint) after the timeout; a plain lock's node keeps version 1, so
// builds that predate permits read it as before. Data that does not start
// with dataMark and a known version, or does not decode, is read as a label
// alone, as it always was; a node without a limit has limit 1. (An older node whose label happens to
// start with those two bytes and decode would be misread; no writer of this
// package makes one.)
type nodeData struct {
	label string
	ttl   time.Duration // zero when the node does not record it
	limit int           // 1 for a plain lock (and a node that predates permits)
	value string
}

const (
	dataMark    = 0x00
	dataVersion = 0x01
	// dataVersionLimit: version 1 with the limit after the timeout.
	dataVersionLimit = 0x02
)

func (d nodeData) encode() []byte {
	buf := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(d.label)+len(d.value))
	if d.limit > 1 {
		buf = append(buf, dataMark, dataVersionLimit)
		buf = binary.AppendUvarint(buf, uint64(max(d.ttl.Milliseconds(), 0)))
		buf = binary.AppendUvarint(buf, uint64(d.limit))
	} else {
		buf = append(buf, dataMark, dataVersion)
		buf = binary.AppendUvarint(buf, uint64(max(d.ttl.Milliseconds(), 0)))
	}
	buf = binary.AppendUvarint(buf, uint64(len(d.label)))
	buf = append(buf, d.label...)
	return append(buf, d.value...)
}

func decodeData(p []byte) nodeData {
	legacy := nodeData{label: string(p), limit: 1}
	if len(p) < 2 || p[0] != dataMark || (p[1] != dataVersion && p[1] != dataVersionLimit) {
		return legacy
	}
	rest := p[2:]
	ms, n := binary.Uvarint(rest)
	if n <= 0 || ms > uint64(time.Duration(1<<63-1)/time.Millisecond) {
		return legacy
	}
	rest = rest[n:]
	limit := uint64(1)
	if p[1] == dataVersionLimit {
		limit, n = binary.Uvarint(rest)
		if n <= 0 || limit < 2 || limit > 1<<31 {
			return legacy
		}
		rest = rest[n:]
	}
	ll, n := binary.Uvarint(rest)
	if n <= 0 || ll > uint64(len(rest)-n) {
		return legacy
	}
	rest = rest[n:]
	return nodeData{ttl: time.Duration(ms) * time.Millisecond, limit: int(limit), label: string(rest[:ll]), value: string(rest[ll:])}
}
