package etcd

import (
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

func TestParseURL_Valid(t *testing.T) {
	u, _ := url.Parse("etcd://alice:s3cret@h1:2379,h2,10.0.0.3:32379/app/locks?request_timeout=2s&dial_timeout=3s")
	c, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://h1:2379", "http://h2:2379", "http://10.0.0.3:32379"}
	if strings.Join(c.client.Endpoints, " ") != strings.Join(want, " ") {
		t.Errorf("endpoints %v, want %v", c.client.Endpoints, want)
	}
	if c.client.Username != "alice" || c.client.Password != "s3cret" {
		t.Errorf("credentials %q/%q", c.client.Username, c.client.Password)
	}
	bc, err := splitOptions(c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if bc.prefix != "app/locks/" || bc.requestTimeout != 2*time.Second || c.client.DialTimeout != 3*time.Second {
		t.Errorf("prefix %q, request timeout %v, dial timeout %v", bc.prefix, bc.requestTimeout, c.client.DialTimeout)
	}
	if c.client.TLS != nil {
		t.Error("TLS set without being asked for")
	}

	u, _ = url.Parse("etcd://h1/?tls=true&server_name=etcd.example&insecure_skip_verify=true")
	if c, err = parseURL(u); err != nil {
		t.Fatal(err)
	}
	if c.client.Endpoints[0] != "https://h1:2379" || c.client.TLS == nil || c.client.TLS.ServerName != "etcd.example" || !c.client.TLS.InsecureSkipVerify {
		t.Errorf("TLS URL gave endpoints %v, TLS %+v", c.client.Endpoints, c.client.TLS)
	}
}

func TestParseURL_Malformed_NamesThePart(t *testing.T) {
	for raw, part := range map[string]string{
		"etcd:opaque":                     "opaque",
		"etcd:///prefix":                  "missing host",
		"etcd://h1,,h2/":                  "empty host",
		"etcd://h1:0/":                    "port",
		"etcd://h1:99999/":                "port",
		"etcd://h1/?bogus=1":              "bogus",
		"etcd://h1/?tls=maybe":            "tls",
		"etcd://h1/?dial_timeout=-1s":     "dial_timeout",
		"etcd://h1/?request_timeout=soon": "request_timeout",
		"etcd://h1/?cert_file=/x":         "cert_file and key_file",
		"etcd://h1/?ca_file=/nonexistent": "ca_file",
		"etcd://:pw@h1/":                  "user name",
		"etcd://h1/a%00b":                 "NUL",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", raw, err)
		}
		_, err = parseURL(u)
		if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), part) {
			t.Errorf("parseURL(%q) = %v, want ErrInvalidURL naming %q", raw, err, part)
		}
	}
}

func TestEscape_DistinctKeys_DisjointRanges(t *testing.T) {
	keys := []string{"a", "a/b", "a/", "/a", "a%2Fb", "a%b", "a\x00b", "a\x00", "%", "%25", "..", "a b", "ä", "a/b/c"}
	for i, a := range keys {
		pa := lockPrefix("p/", a)
		if strings.Count(pa, "/") != 1 || strings.Count(pa, "\x00") != 1 {
			t.Errorf("lockPrefix(%q) = %q: the escaped key contains '/' or NUL", a, pa)
		}
		for j, b := range keys {
			if i == j {
				continue
			}
			if pb := lockPrefix("p/", b); strings.HasPrefix(pb, pa) {
				t.Errorf("range of %q (%q) contains the range of %q (%q)", a, pa, b, pb)
			}
		}
	}
	if waiterKey("p/a/", 1, 0) == waiterKey("p/a/", 1, 1) || waiterKey("p/a/", 1, 0) == waiterKey("p/a/", 2, 0) {
		t.Error("two slots or two leases share a waiter key")
	}
	// Slots: a name is handed out once at a time, and reused once freed.
	s := &sharedLease{b: &backend{prefix: "p/"}, id: 7, slots: map[slot]struct{}{}}
	k0, k1 := s.claim("p/a/", record{owner: driver.NewOwnerID()}), s.claim("p/a/", record{owner: driver.NewOwnerID()})
	if k0.name == k1.name {
		t.Fatalf("two live acquisitions got the name %q", k0.name)
	}
	k0.free()
	if k2 := s.claim("p/a/", record{owner: driver.NewOwnerID()}); k2.name != k0.name {
		t.Errorf("freed name %q not reused (got %q)", k0.name, k2.name)
	}
}

func TestRoundTTL_UpToWholeSecondsNeverDown(t *testing.T) {
	b := &backend{}
	for in, want := range map[time.Duration]time.Duration{
		time.Millisecond:        time.Second,
		time.Second:             time.Second,
		1001 * time.Millisecond: 2 * time.Second,
		15 * time.Second:        15 * time.Second,
	} {
		if got, err := b.RoundTTL(in); err != nil || got != want {
			t.Errorf("RoundTTL(%v) = %v, %v; want %v", in, got, err, want)
		}
	}
	b.raiseServerMin(3)
	if got, _ := b.RoundTTL(time.Second); got != 3*time.Second {
		t.Errorf("RoundTTL(1s) with a server minimum of 3 s = %v", got)
	}
	if _, err := b.RoundTTL(math.MaxInt64); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("RoundTTL(huge) = %v, want ErrInvalidOption", err)
	}
}
