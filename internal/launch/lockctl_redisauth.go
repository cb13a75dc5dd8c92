package launch

import (
	"context"
	"fmt"
	"strings"
)

// RedisRequirePass is the probe of a Redis server that requires a password
// the probe does not have: a NOAUTH refusal of PING proves it serves clients
// as well as a PONG does (RedisInfo, which does not authenticate, would wait
// for ever).
func RedisRequirePass(ctx context.Context, addr string) (string, error) {
	r, err := exchange(ctx, addr, "PING\r\n", func(r string) bool { return strings.Contains(r, "\r\n") })
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(r, "-NOAUTH") || strings.HasPrefix(r, "+PONG") {
		return "redis-server (requirepass)", nil
	}
	return "", fmt.Errorf("PING: %q", strings.TrimSpace(r))
}
