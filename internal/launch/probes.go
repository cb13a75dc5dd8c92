package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// exchange sends req on a new connection to addr and reads until done
// accepts the answer so far, the server closes, or ctx ends.
func exchange(ctx context.Context, addr, req string, done func(string) bool) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	b := make([]byte, 4096)
	for {
		n, err := c.Read(b)
		buf.Write(b[:n])
		if done(buf.String()) {
			return buf.String(), nil
		}
		if err != nil {
			return buf.String(), fmt.Errorf("%s: %w (after %q)", strings.TrimSpace(req), err, buf.String())
		}
	}
}

// redisBulk asks a Redis server cmd, whose answer is a bulk string.
func redisBulk(ctx context.Context, addr, cmd string) (string, error) {
	r, err := exchange(ctx, addr, cmd+"\r\n", func(r string) bool {
		head, body, ok := strings.Cut(r, "\r\n")
		if !ok || !strings.HasPrefix(head, "$") {
			return ok // an error or another type: complete
		}
		n, err := strconv.Atoi(head[1:])
		return err != nil || len(body) >= n
	})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(r, "$") {
		return "", fmt.Errorf("%s: %q", cmd, strings.TrimSpace(r))
	}
	_, body, _ := strings.Cut(r, "\r\n")
	return body, nil
}

// RedisInfo is the probe of a Redis server: INFO server.
func RedisInfo(ctx context.Context, addr string) (string, error) {
	info, err := redisBulk(ctx, addr, "INFO server")
	if err != nil {
		return "", err
	}
	return redisVersion(info), nil
}

// redisVersion names the server whose INFO server reply is info.
func redisVersion(info string) string {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return "redis-server " + v
		}
	}
	return "redis-server (version unknown)"
}

// RedisClusterOK checks that a Redis Cluster node sees every slot served.
func RedisClusterOK(ctx context.Context, addr string) error {
	r, err := redisBulk(ctx, addr, "CLUSTER INFO")
	if err != nil {
		return err
	}
	if !strings.Contains(r, "cluster_state:ok") {
		return fmt.Errorf("cluster not ok: %q", r)
	}
	return nil
}

// ZooKeeperSrvr returns the answer of the srvr four-letter word.
func ZooKeeperSrvr(ctx context.Context, addr string) (string, error) {
	return exchange(ctx, addr, "srvr", func(string) bool { return false })
}

// ZooKeeperServing is the probe of a ZooKeeper server: it accepts a
// standalone server, a leader or a follower; a member still electing a
// leader answers "not currently serving requests".
func ZooKeeperServing(ctx context.Context, addr string) (string, error) {
	r, _ := ZooKeeperSrvr(ctx, addr)
	if !strings.Contains(r, "Mode: ") {
		return "", fmt.Errorf("srvr: %q", r)
	}
	for line := range strings.SplitSeq(r, "\n") {
		if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			return "ZooKeeper " + strings.Split(v, ",")[0], nil
		}
	}
	return "ZooKeeper (version unknown)", nil
}

func httpDo(ctx context.Context, method, url, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return b, nil
}

// EtcdHealth is the probe of an etcd member: /health, which etcd answers
// true only while the member has a leader and can serve a quorum read.
func EtcdHealth(ctx context.Context, addr string) (string, error) {
	b, err := httpDo(ctx, http.MethodGet, "http://"+addr+"/health", "")
	if err != nil {
		return "", err
	}
	if !bytes.Contains(b, []byte(`"health":"true"`)) {
		return "", fmt.Errorf("/health: %s", b)
	}
	b, err = httpDo(ctx, http.MethodGet, "http://"+addr+"/version", "")
	if err != nil {
		return "", err
	}
	var v struct{ Etcdserver string }
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	return "etcd " + v.Etcdserver, nil
}

// EtcdIsLeader asks a member, through the gRPC gateway, whether it is the
// leader.
func EtcdIsLeader(ctx context.Context, addr string) (bool, error) {
	b, err := httpDo(ctx, http.MethodPost, "http://"+addr+"/v3/maintenance/status", "{}")
	if err != nil {
		return false, err
	}
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return false, err
	}
	return st.Leader != "" && st.Leader == st.Header.MemberID, nil
}

// PostgresPing is the probe of a PostgreSQL server: a query as user
// postgres.
func PostgresPing(ctx context.Context, addr string) (string, error) {
	conn, err := pgx.Connect(ctx, PostgresDSN(addr))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", err
	}
	return "PostgreSQL " + strings.Fields(v)[0], nil
}
