package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// What other sessions can learn of a holder. Its lock transaction never
// commits, so nothing it writes is visible; what it shows instead is its
// application_name, which pg_stat_activity shows to every role:
//
//	locker <token> <ttl_ms> =<label>   the label is complete
//	locker <token> <ttl_ms> +<label>   the label is complete; a holder record follows
//	locker <token> <ttl_ms> ~<prefix>  the label is in the holder record
//
// A label that is not printable ASCII or too long for the 63 bytes the
// server keeps, and a published value, go to a holder record instead: a row
// keyed 0xff || key, committed by another connection (schema.sql), which
// counts only while its token is the one the holder's session shows.
const (
	appPrefix  = "locker "
	maxAppName = 63 // NAMEDATALEN-1: the server truncates the rest
	maxDigits  = 19 // of a token (a positive int64)
)

// holderAppName returns what follows the token in a holder's
// application_name, and whether the label is complete in it. recorded says
// the grant writes a holder record (a value or a minimum hold): until it is
// committed, the holder is not fully known (see Inspect).
func holderAppName(ttl time.Duration, label string, recorded bool) (suffix string, complete bool) {
	s := " " + millis(ttl) + " "
	room := maxAppName - len(appPrefix) - maxDigits - len(s) - 1
	if len(label) <= room && printable(label) {
		if recorded {
			return s + "+" + label, true
		}
		return s + "=" + label, true
	}
	p := []byte(label[:min(len(label), room)])
	for i, c := range p {
		if c < ' ' || c > '~' {
			p[i] = '?'
		}
	}
	return s + "~" + string(p), false
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// holderApp is what a holder's application_name says.
type holderApp struct {
	token    uint64
	ttl      time.Duration
	label    string
	complete bool
	recorded bool // a holder record of this token is written after the grant
}

// parseHolderApp reads a holder's application_name; false if it is not
// one (a holder of an older release of this package).
func parseHolderApp(s string) (holderApp, bool) {
	var h holderApp
	rest, ok := strings.CutPrefix(s, appPrefix)
	if !ok {
		return h, false
	}
	f := strings.SplitN(rest, " ", 3)
	if len(f) != 3 || f[2] == "" {
		return h, false
	}
	token, err1 := strconv.ParseUint(f[0], 10, 64)
	ms, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || !strings.ContainsRune("=+~", rune(f[2][0])) {
		return h, false
	}
	return holderApp{token: token, ttl: time.Duration(ms) * time.Millisecond, label: f[2][1:],
		complete: f[2][0] != '~', recorded: f[2][0] != '='}, true
}

// watcherAppName is the application_name of a connection that watches the
// table's locks, for people reading pg_stat_activity.
func (b *backend) watcherAppName() string { return appPrefix + "watch " + b.n.channel }

// watchLock is the advisory lock (64-bit key) that a watch of key holds
// shared for as long as it lasts: a grant or release finds out whether
// anyone watches by trying it exclusively, at the cost of a lock-table
// entry, where reading pg_stat_activity would copy every session's status.
// A hash of the table and the key: an application's advisory locks are
// unlikely to meet it (one that did would only cause needless notifies,
// or wait for the watch).
func (b *backend) watchLock(key string) int64 {
	sum := sha256.Sum256([]byte(b.n.table + "\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// payload is the NOTIFY payload of key: a hash, as a key may hold a NUL
// byte and be longer than a payload may.
func payload(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// recordKey is the key of key's holder record.
func recordKey(key string) []byte { return append([]byte{0xff}, key...) }

// notifySQL sends the table's NOTIFY for a key ($2) on channel $1, committed
// without a WAL flush: it matters only to watchers connected now.
const notifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"

// recordSQL writes a holder record, unless a newer holder's (a larger
// token) is there, and notifies, in one statement. $8 is the minimum hold
// in milliseconds (NULL: none), counted from now on the server's clock:
// the grant was a little earlier, so the hold is at least that long.
func (b *backend) recordSQL() string {
	return "WITH up AS (INSERT INTO " + b.n.table + " AS t (key, owner, token, label, value, held_until) " +
		"VALUES ($3, $4, $5, $6, $7, clock_timestamp() + $8::bigint * interval '1 millisecond') " +
		"ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, label = excluded.label, value = excluded.value, " +
		"held_until = excluded.held_until WHERE t.token IS NULL OR t.token < excluded.token) " + notifySQL
}

// recordLabel is the label a holder record carries: the label where
// application_name cannot hold it or the lock has a minimum hold (the
// record shows it once the session is gone), else NULL.
func (l *lock) recordLabel() any {
	if _, complete := holderAppName(0, l.label, false); complete && l.minHold == 0 {
		return nil
	}
	return l.label
}

// announce makes a new holder known beyond its session, on another pool
// connection, before the lock is handed out: its holder record if it has a
// value, a label application_name cannot hold, or a minimum hold, and a
// NOTIFY if anyone watches. Usually there is nothing to do.
func (b *backend) announce(ctx context.Context, l *lock, value string, watched bool) error {
	label := l.recordLabel()
	var hold any // NULL: no minimum hold
	if l.minHold > 0 {
		hold = int64((l.minHold + time.Millisecond - 1) / time.Millisecond)
	}
	var err error
	switch {
	case value != "" || label != nil || hold != nil:
		_, err = b.pool.Exec(ctx, b.recordSQL(), b.n.channel, payload(l.key),
			recordKey(l.row), l.owner[:], int64(l.token), label, value, hold)
	case watched:
		_, err = b.pool.Exec(ctx, notifySQL, b.n.channel, payload(l.key))
	}
	if err != nil {
		return fmt.Errorf("postgres: announcing the grant: %w", err)
	}
	return nil
}
