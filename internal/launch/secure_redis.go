package launch

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// RedisTLS makes a Redis server speak TLS only (no plain-text port).
type RedisTLS struct {
	CA, Cert, Key []byte // PEM: the CA clients' certificates are checked against, the server's pair
	// AuthClients refuses clients without a certificate signed by CA
	// (tls-auth-clients yes); otherwise certificates are optional.
	AuthClients bool
	// Probe is how the readiness probe connects: it must trust CA and,
	// with AuthClients, present a client certificate.
	Probe *tls.Config
}

// RedisSecure runs redis-server like Redis, its default user protected by
// password (requirepass), over TLS only when tl is not nil; extra are more
// redis-server flags. The probe authenticates as the default user.
func RedisSecure(image string, port int, password string, tl *RedisTLS, extra ...string) Spec {
	args := []string{"--requirepass", password}
	var files map[string]File
	if tl != nil {
		files = map[string]File{
			"/etc/locker/tls/ca.pem":         {Data: tl.CA},
			"/etc/locker/tls/server.pem":     {Data: tl.Cert},
			"/etc/locker/tls/server-key.pem": {Data: tl.Key, Mode: 0o600},
		}
		auth := "optional"
		if tl.AuthClients {
			auth = "yes"
		}
		args = append(args, "--tls-port", strconv.Itoa(port),
			"--tls-ca-cert-file", "/etc/locker/tls/ca.pem",
			"--tls-cert-file", "/etc/locker/tls/server.pem",
			"--tls-key-file", "/etc/locker/tls/server-key.pem",
			"--tls-auth-clients", auth)
	}
	sp := Redis(image, port, append(args, extra...)...)
	if tl != nil {
		// Redis takes the last --port: 0 turns the plain-text port off.
		sp.Cmd = append(sp.Cmd, "--port", "0")
		sp.Files = files
	}
	var probe *tls.Config
	if tl != nil {
		probe = tl.Probe
	}
	sp.Services[0].Probe = func(ctx context.Context, addr string) (string, error) {
		return RedisAuthInfo(ctx, addr, probe, password)
	}
	return sp
}

// RedisAuthInfo is the probe of a Redis server whose default user has a
// password: AUTH, then INFO server, over TLS when tl is not nil.
func RedisAuthInfo(ctx context.Context, addr string, tl *tls.Config, password string) (string, error) {
	info, err := redisAuthBulk(ctx, addr, tl, password, "INFO", "server")
	if err != nil {
		return "", err
	}
	return redisVersion(info), nil
}

// RedisAuthClusterOK is RedisClusterOK for a node whose default user has
// a password.
func RedisAuthClusterOK(ctx context.Context, addr, password string) error {
	r, err := redisAuthBulk(ctx, addr, nil, password, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	if !strings.Contains(r, "cluster_state:ok") {
		return fmt.Errorf("cluster not ok: %q", r)
	}
	return nil
}

// redisAuthBulk sends AUTH password and then cmd, whose answer is a bulk
// string, and returns that answer.
func redisAuthBulk(ctx context.Context, addr string, tl *tls.Config, password string, cmd ...string) (string, error) {
	var d net.Dialer
	var c net.Conn
	var err error
	if tl != nil {
		c, err = (&tls.Dialer{NetDialer: &d, Config: tl}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var req strings.Builder
	for _, words := range [][]string{{"AUTH", password}, cmd} {
		fmt.Fprintf(&req, "*%d\r\n", len(words))
		for _, w := range words {
			fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(w), w)
		}
	}
	if _, err := io.WriteString(c, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "+OK") {
		return "", fmt.Errorf("AUTH: %q", strings.TrimSpace(line))
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
		return "", fmt.Errorf("%s: %q", strings.Join(cmd, " "), strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}
