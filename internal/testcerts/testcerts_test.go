package testcerts_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/testcerts"
)

// A server certificate verifies for the names it was issued for and a client
// certificate of the same CA is accepted by a server that requires one;
// another CA's certificates are refused both ways.
func TestHandshake_VerifiesBothWaysAndRefusesAnotherCA(t *testing.T) {
	ca, other := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "other")
	srv := ca.Server(t, "zk1")
	pair, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	dial := func(conf *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), conf)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate at the first read.
		_, err = c.Read(make([]byte, 1))
		if err != nil && !strings.Contains(err.Error(), "EOF") {
			return err
		}
		return nil
	}
	client := ca.Client(t, "alice")
	if err := dial(ca.ClientTLS(t, &client)); err != nil {
		t.Fatalf("same CA, client certificate: %v", err)
	}
	named := ca.ClientTLS(t, &client)
	named.ServerName = "zk1"
	if err := dial(named); err != nil {
		t.Fatalf("server name zk1: %v", err)
	}
	if err := dial(ca.ClientTLS(t, nil)); err == nil {
		t.Fatal("no client certificate: accepted")
	}
	if err := dial(other.ClientTLS(t, &client)); err == nil {
		t.Fatal("server verified against another CA")
	}
	stranger := other.Client(t, "mallory")
	if err := dial(ca.ClientTLS(t, &stranger)); err == nil {
		t.Fatal("client certificate of another CA: accepted")
	}
	wrong := ca.ClientTLS(t, &client)
	wrong.ServerName = "elsewhere"
	if err := dial(wrong); err == nil {
		t.Fatal("server name elsewhere: accepted")
	}
}
