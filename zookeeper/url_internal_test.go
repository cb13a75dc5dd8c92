package zookeeper

import (
	"net/url"
	"slices"
	"testing"
)

// Issue 15, item 10: an IPv6 host without a port became "[[::1]]:2181".
func TestParseURL_IPv6HostWithoutPort_DefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"zookeeper://[::1]/locker":       "[::1]:2181",
		"zookeeper://[fe80::1%25eth0]/r": "[fe80::1%eth0]:2181",
		"zookeeper://[::1]:2182/locker":  "[::1]:2182",
		"zookeeper://127.0.0.1/locker":   "127.0.0.1:2181",
		"zookeeper://zk.example:2183/x":  "zk.example:2183",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !slices.Equal(p.servers, []string{want}) {
			t.Errorf("%s: servers = %q, want [%q]", in, p.servers, want)
		}
	}
}
