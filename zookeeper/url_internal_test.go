package zookeeper

import (
	"net/url"
	"slices"
	"testing"
)

// Issue 15, item 10: an IPv6 host without a port became "[[::1]]:2181".
func TestParseURL_IPv6HostWithoutPort_DefaultPort(t *testing.T) {
	u, err := url.Parse("zookeeper://[::1],[fe80::1]:2182,h/locker")
	if err != nil {
		t.Fatal(err)
	}
	_, servers, _, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[::1]:2181", "[fe80::1]:2182", "h:2181"}; !slices.Equal(servers, want) {
		t.Fatalf("servers = %q, want %q", servers, want)
	}
}
