package launch

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
)

// ZooKeeperTLS is the TLS side of SecureZooKeeper, in PEM.
type ZooKeeperTLS struct {
	SecurePort      int    // secureClientPort
	CertPEM, KeyPEM []byte // the server's certificate and key (PKCS#8)
	CAPEM           []byte // the CAs trusted to sign client certificates
	ClientAuth      string // ssl.clientAuth: "need" (the default), "want" or "none"
}

// SecureZooKeeper runs ZooKeeper 3.8 like ZooKeeper, served by Netty (the
// connection factory a secure client port needs), with a plain client port
// (port: the probe's, and the tests' way in without TLS) and a TLS client
// port (z.SecurePort). Its second Service is the TLS port.
func SecureZooKeeper(image string, port int, z ZooKeeperTLS, o ZooKeeperOptions) Spec {
	auth := z.ClientAuth
	if auth == "" {
		auth = "need"
	}
	o.Servers += fmt.Sprintf(`secureClientPort=%d
ssl.keyStore.location=/tls/server.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=/tls/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=%s
`, z.SecurePort, auth)
	o.JVM += " -Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
	sp := ZooKeeper(image, port, o)
	sp.Services = append(sp.Services, Service{"zookeeper-tls", z.SecurePort, tlsListening})
	key := append(append([]byte{}, z.KeyPEM...), z.CertPEM...)
	sp.Files = map[string]File{
		"/tls/server.pem": {Data: key, Mode: 0o600},
		"/tls/ca.pem":     {Data: z.CAPEM},
	}
	return sp
}

// tlsListening is the probe of a TLS port: a server that completes a
// handshake, or refuses it with a TLS alert (a client certificate it
// wants), listens; Docker's port publishing alone answers neither.
func tlsListening(ctx context.Context, addr string) (string, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe: it only asks whether TLS answers
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if strings.Contains(err.Error(), "remote error: tls") {
			return "TLS (client certificate required)", nil
		}
		return "", err
	}
	_ = c.Close()
	return "TLS", nil
}
