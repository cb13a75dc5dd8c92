package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
)

// Open's errors for every backend lockctl links, on URLs whose password must
// not show: the backends' own parse errors (a bad parameter, a malformed
// user info) and dial errors (127.0.0.1:1 refuses at once; the context
// bounds the rest).
func TestOpen_BackendURLs_PasswordNeverInError(t *testing.T) {
	const secret = "SECRETpw"
	var urls []string
	for _, base := range []string{
		"redis://u:SECRETpw@127.0.0.1:1/0",
		"rediss://u:SECRETpw@127.0.0.1:1/0",
		"redlock://u:SECRETpw@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
		"redis://u:SECRETpw@127.0.0.1:1,127.0.0.1:2/?cluster=true",
		"redis://u:SECRETpw@127.0.0.1:1/?master_name=m",
		"etcd://u:SECRETpw@127.0.0.1:1/p",
		"zookeeper://u:SECRETpw@127.0.0.1:1/r",
		"postgres://u:SECRETpw@127.0.0.1:1/db",
		"postgresql://u:SECRETpw@127.0.0.1:1/db",
		"postgres://u@127.0.0.1:1/db?password=SECRETpw",
	} {
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		urls = append(urls,
			base,                             // unreachable
			base+sep+"bad=1",                 // a parameter no one knows
			base+sep+"ttl=1s&namespace=a%00", // the common parameters
			strings.Replace(base, "127.0.0.1:1", "127.0.0.1:99999", 1), // bad port
			strings.Replace(base, "SECRETpw", "SECRETpw/x", 1),         // unescaped '/'
			strings.Replace(base, "SECRETpw", "SECRETpw%zz", 1),        // bad escape
			strings.Replace(base, "u:", ":", 1),                        // no user name
		)
	}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		l, err := locker.Open(ctx, u)
		cancel()
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", redact(u))
			continue
		}
		t.Logf("Open(%s): %v", redact(u), err)
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "%zz") {
			t.Errorf("Open(%s): the password shows in %q", redact(u), err)
		}
	}
}
