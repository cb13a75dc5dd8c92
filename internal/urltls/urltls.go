// Package urltls reads the TLS query parameters that the URLs of the
// networked backends share, so that one spelling means one thing everywhere:
//
//	tls=true|false            use TLS (implied by any other parameter here)
//	ca_file=PATH              PEM certificates trusted to sign the server's
//	                          (default: the system's roots)
//	cert_file=PATH            the client certificate (PEM) …
//	key_file=PATH             … and its key; the two go together
//	server_name=NAME          the name the server's certificate must carry
//	                          (default: the host dialled)
//	insecure_skip_verify=true accept any server certificate: for tests only
//
// Files are read when the URL is parsed, so a missing or malformed one fails
// Open at once rather than at the first connection.
package urltls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
)

// Names are the query parameters Params reads, for "known: …" messages.
var Names = []string{"tls", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"}

// Params collects the TLS parameters of one URL.
type Params struct {
	use                       bool
	conf                      tls.Config
	caFile, certFile, keyFile string
}

// Set records the query parameter name=value. known is false for a name
// that is not a TLS parameter (Set then does nothing); err says what is
// wrong with the value of one that is.
func (p *Params) Set(name, value string) (known bool, err error) {
	switch name {
	case "tls":
		if p.use, err = strconv.ParseBool(value); err != nil {
			return true, fmt.Errorf("query parameter tls=%q: want true or false", value)
		}
		return true, nil
	case "insecure_skip_verify":
		if p.conf.InsecureSkipVerify, err = strconv.ParseBool(value); err != nil {
			return true, fmt.Errorf("query parameter insecure_skip_verify=%q: want true or false", value)
		}
	case "server_name":
		p.conf.ServerName = value
	case "ca_file":
		p.caFile = value
	case "cert_file":
		p.certFile = value
	case "key_file":
		p.keyFile = value
	default:
		return false, nil
	}
	p.use = true
	return true, nil
}

// Config returns the client TLS configuration the parameters ask for, or
// nil when they ask for none.
func (p *Params) Config() (*tls.Config, error) {
	if (p.certFile == "") != (p.keyFile == "") {
		return nil, fmt.Errorf("query parameters cert_file and key_file go together")
	}
	if !p.use {
		return nil, nil
	}
	c := p.conf.Clone()
	c.MinVersion = tls.VersionTLS12
	if p.caFile != "" {
		pem, err := os.ReadFile(p.caFile)
		if err != nil {
			return nil, fmt.Errorf("query parameter ca_file: %v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("query parameter ca_file: no PEM certificate in %s", p.caFile)
		}
	}
	if p.certFile != "" {
		cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
		if err != nil {
			return nil, fmt.Errorf("query parameters cert_file/key_file: %v", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
