package redis

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// The server-side scripts, one per operation, so that every operation is one
// EVALSHA round trip (go-redis falls back to EVAL once when a server has not
// cached a script yet). Each is assembled from the libraries it uses and no
// more: a library function costs a closure on every run of the script.
var (
	//go:embed clock.lua
	clockLua string
	//go:embed signal.lua
	signalLua string
	//go:embed take.lua
	takeLua string
	//go:embed queue.lua
	queueLua string
	//go:embed waiting.lua
	waitingLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed acquire_wait.lua
	acquireWaitLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed release.lua
	releaseLua string
	//go:embed leave.lua
	leaveLua string
	//go:embed heartbeat.lua
	heartbeatLua string
	//go:embed fence.lua
	fenceLua string
	//go:embed guard.lua
	guardLua string
	//go:embed inspect.lua
	inspectLua string
	//go:embed publish.lua
	publishLua string
	//go:embed permits.lua
	permitsLua string
	//go:embed permit.lua
	permitLua string
	//go:embed permit_release.lua
	permitReleaseLua string
	//go:embed permit_refresh.lua
	permitRefreshLua string

	// grantLib is what takes a lock: the clock, the signal and the grant.
	grantLib = clockLua + signalLua + takeLua

	acquireScript = goredis.NewScript(grantLib + acquireLua + queueLua + waitingLua + acquireWaitLua)
	releaseScript = goredis.NewScript(clockLua + signalLua + queueLua + releaseLua)
	leaveScript   = goredis.NewScript(clockLua + queueLua + waitingLua + leaveLua)
	beatScript    = goredis.NewScript(clockLua + queueLua + waitingLua + heartbeatLua)
	inspectScript = goredis.NewScript(clockLua + inspectLua)
	publishScript = goredis.NewScript(signalLua + publishLua)
	refreshScript = goredis.NewScript(refreshLua)
	fenceScript   = goredis.NewScript(fenceLua)
	guardScript   = goredis.NewScript(guardLua)

	permitScript        = goredis.NewScript(grantLib + queueLua + waitingLua + permitsLua + permitLua)
	permitReleaseScript = goredis.NewScript(clockLua + signalLua + queueLua + permitsLua + permitReleaseLua)
	permitRefreshScript = goredis.NewScript(clockLua + permitsLua + permitRefreshLua)
)

// ttlMillis is the TTL as sent to PX/PEXPIRE. RoundTTL has already made it a
// whole, positive number of milliseconds.
func ttlMillis(ttl time.Duration) int64 { return int64(ttl / time.Millisecond) }

// serverTTL is how long a grant lives on the server in ms: the TTL, or
// the minimum hold (rounded up to a whole ms) if that is longer.
func serverTTL(req *driver.Request) int64 {
	if req.MinHold <= req.TTL {
		return ttlMillis(req.TTL)
	}
	return holdMillis(req.MinHold)
}

// holdMillis is a minimum hold in whole ms, rounded up (never shortened).
func holdMillis(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// roundTTL rounds up to whole milliseconds, the resolution of PX and PEXPIRE.
func roundTTL(ttl time.Duration) (time.Duration, error) {
	r := (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	if r < ttl || r/time.Millisecond > math.MaxInt32*1000 {
		return 0, fmt.Errorf("TTL %v is too long for Redis", ttl)
	}
	return r, nil
}

// pair reads acquire.lua's reply: a token (in decimal) for a grant, or
// {0, pttl, holder} for a refusal.
func pair(v any, err error) (ok bool, n int64, _ error) {
	if err != nil {
		return false, 0, err
	}
	if s, isStr := v.(string); isStr {
		token, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || token <= 0 {
			return false, 0, fmt.Errorf("redis: unexpected script reply %q", s)
		}
		return true, token, nil
	}
	a, isSlice := v.([]any)
	if !isSlice || len(a) < 2 {
		return false, 0, fmt.Errorf("redis: unexpected script reply %v", v)
	}
	flag, ok1 := a[0].(int64)
	switch x := a[1].(type) {
	case int64:
		n = x
	case string:
		u, perr := strconv.ParseInt(x, 10, 64)
		if perr != nil {
			return false, 0, fmt.Errorf("redis: unexpected script reply %v", v)
		}
		n = u
	default:
		return false, 0, fmt.Errorf("redis: unexpected script reply %v", v)
	}
	if !ok1 {
		return false, 0, fmt.Errorf("redis: unexpected script reply %v", v)
	}
	return flag == 1, n, nil
}

// holderOf reads the holder's owner value from acquire.lua's {0, pttl,
// holder} reply ("" if absent).
func holderOf(v any) string {
	if a, ok := v.([]any); ok && len(a) >= 3 {
		s, _ := a[2].(string)
		return s
	}
	return ""
}
