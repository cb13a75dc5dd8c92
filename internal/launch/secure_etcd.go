package launch

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// EtcdTLS is the TLS side of a secured etcd member: its certificate and key,
// and the CA whose clients it trusts. Files go into the container, which
// (FROM scratch) has no shell to write them.
type EtcdTLS struct {
	CertPEM, KeyPEM []byte
	CAPEM           []byte // --trusted-ca-file, with ClientCertAuth
	ClientCertAuth  bool   // --client-cert-auth: every client shows a certificate the CA signed
	// Client is the probe's configuration: it trusts the CA and, with
	// ClientCertAuth, presents a client certificate.
	Client *tls.Config
}

// Where EtcdSecureSingle puts the certificate files in the container.
const (
	etcdCertFile = "/certs/server.pem"
	etcdKeyFile  = "/certs/server-key.pem"
	etcdCAFile   = "/certs/ca.pem"
)

// EtcdSecureSingle runs a one-member etcd serving clients on port over TLS
// (https://, advertised as https://127.0.0.1:port). Authentication is not
// enabled here: a test enables it through the client's Auth API, as an
// operator would with etcdctl.
func EtcdSecureSingle(image string, port int, t EtcdTLS) Spec {
	sp := EtcdSingle(image, nil, port)
	for i, a := range sp.Cmd {
		switch a {
		case "--listen-client-urls", "--advertise-client-urls":
			sp.Cmd[i+1] = strings.Replace(sp.Cmd[i+1], "http://", "https://", 1)
		}
	}
	sp.Cmd = append(sp.Cmd, "--cert-file", etcdCertFile, "--key-file", etcdKeyFile)
	sp.Files = map[string]File{
		etcdCertFile: {Data: t.CertPEM},
		etcdKeyFile:  {Data: t.KeyPEM, Mode: 0o600},
	}
	if t.ClientCertAuth {
		// A trusted CA alone already makes etcd demand client certificates.
		sp.Cmd = append(sp.Cmd, "--client-cert-auth", "--trusted-ca-file", etcdCAFile)
		sp.Files[etcdCAFile] = File{Data: t.CAPEM}
	}
	sp.Services = []Service{{"etcd", port, EtcdHealthTLS(t.Client)}}
	return sp
}

// EtcdHealthTLS is EtcdHealth over https with conf.
func EtcdHealthTLS(conf *tls.Config) Probe {
	cli := &http.Client{Transport: &http.Transport{TLSClientConfig: conf.Clone()}}
	get := func(ctx context.Context, url string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := cli.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
		}
		return b, err
	}
	return func(ctx context.Context, addr string) (string, error) {
		b, err := get(ctx, "https://"+addr+"/health")
		if err != nil {
			return "", err
		}
		if !bytes.Contains(b, []byte(`"health":"true"`)) {
			return "", fmt.Errorf("/health: %s", b)
		}
		if b, err = get(ctx, "https://"+addr+"/version"); err != nil {
			return "", err
		}
		var v struct{ Etcdserver string }
		if err := json.Unmarshal(b, &v); err != nil {
			return "", fmt.Errorf("/version: %w", err)
		}
		return "etcd " + v.Etcdserver + " over TLS", nil
	}
}
