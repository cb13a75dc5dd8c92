package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The probes ask each server the question that proves it serves clients,
// not merely that a port is open: Docker's port publishing accepts
// connections before the server in the container listens.

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

func redisPing(ctx context.Context, s *Server) error {
	_, err := exchange(ctx, s.Addr(), "PING\r\n", func(r string) bool { return strings.HasPrefix(r, "+PONG\r\n") })
	return err
}

// redisClusterOK checks that a Redis Cluster node sees every slot served.
func redisClusterOK(ctx context.Context, s *Server) error {
	r, err := exchange(ctx, s.Addr(), "CLUSTER INFO\r\n", func(r string) bool { return strings.Contains(r, "cluster_state:") })
	if err != nil {
		return err
	}
	if !strings.Contains(r, "cluster_state:ok") {
		return fmt.Errorf("cluster not ok: %q", r)
	}
	return nil
}

// zkSrvr returns the answer of the srvr four-letter word.
func zkSrvr(ctx context.Context, addr string) (string, error) {
	return exchange(ctx, addr, "srvr", func(string) bool { return false })
}

// zkServing accepts a standalone server, a leader or a follower; a member
// still electing a leader answers "not currently serving requests".
func zkServing(ctx context.Context, s *Server) error {
	r, _ := zkSrvr(ctx, s.Addr())
	if !strings.Contains(r, "Mode: ") {
		return fmt.Errorf("srvr: %q", r)
	}
	return nil
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

// etcdHealth checks /health, which etcd answers true only while the member
// has a leader and can serve a quorum read.
func etcdHealth(ctx context.Context, s *Server) error {
	b, err := httpDo(ctx, http.MethodGet, "http://"+s.Addr()+"/health", "")
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(`"health":"true"`)) {
		return fmt.Errorf("/health: %s", b)
	}
	return nil
}

// etcdIsLeader asks a member, through the gRPC gateway, whether it is the
// leader.
func etcdIsLeader(ctx context.Context, addr string) (bool, error) {
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

func pgPing(ctx context.Context, s *Server) error {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// poll calls f until it succeeds or d has passed, and returns its last error.
func poll(d time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
