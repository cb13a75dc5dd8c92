package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// passwordFile writes content to a file of its own and returns its path.
func passwordFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The rules of the usage text's Credentials paragraph: the URL or the file,
// never both; the engine's variables only when neither gives a password;
// the file's first line without its line ending.
func TestWithCredentials_Sources(t *testing.T) {
	const pw = "s3cr/et:@%x" // reserved characters must survive the URL
	file := passwordFile(t, pw+"\r\nsecond line\n")
	cases := []struct {
		name, url, file string
		env             map[string]string
		want            string // the URL's user info after, "" for unchanged
		wantErr         string // a word of the usage error
	}{
		{name: "file, redis", url: "redis://127.0.0.1:6379/0", file: file, want: ":" + pw},
		{name: "file, user in URL", url: "redis://app@127.0.0.1:6379/0", file: file, want: "app:" + pw},
		{name: "file, zookeeper", url: "zookeeper://app@h:2181/r", file: file, want: "app:" + pw},
		{name: "file, postgres", url: "postgres://app@h/db", file: file, want: "app:" + pw},
		{name: "file beats the environment", url: "redis://h", file: file, env: map[string]string{"REDISCLI_AUTH": "other"}, want: ":" + pw},
		{name: "file and URL", url: "redis://:urlpw@h", file: file, wantErr: "one way"},
		{name: "file and URL parameter", url: "postgres://h/db?password=urlpw", file: file, wantErr: "one way"},
		{name: "file, memory", url: "memory://", file: file, wantErr: "takes no password"},
		{name: "file missing", url: "redis://h", file: file + ".nosuch", wantErr: "no such file"},
		{name: "file empty", url: "redis://h", file: passwordFile(t, "\n"), wantErr: "empty"},
		{name: "REDISCLI_AUTH", url: "rediss://h", env: map[string]string{"REDISCLI_AUTH": pw}, want: ":" + pw},
		{name: "REDISCLI_AUTH, redlock", url: "redlock://a,b,c/", env: map[string]string{"REDISCLI_AUTH": pw}, want: ":" + pw},
		{name: "URL beats the environment", url: "redis://:urlpw@h", env: map[string]string{"REDISCLI_AUTH": pw}},
		{name: "ETCDCTL_USER user:password", url: "etcd://h/p", env: map[string]string{"ETCDCTL_USER": "app:" + pw}, want: "app:" + pw},
		{name: "ETCDCTL_USER and ETCDCTL_PASSWORD", url: "etcd://h/p", env: map[string]string{"ETCDCTL_USER": "a:pp", "ETCDCTL_PASSWORD": pw}, want: "a:pp:" + pw},
		{name: "ETCDCTL_USER's user, file's password", url: "etcd://h/p", file: file, env: map[string]string{"ETCDCTL_USER": "app"}, want: "app:" + pw},
		{name: "ETCDCTL_PASSWORD, URL's user", url: "etcd://app@h/p", env: map[string]string{"ETCDCTL_PASSWORD": pw}, want: "app:" + pw},
		{name: "ETCDCTL_USER another user", url: "etcd://app@h/p", env: map[string]string{"ETCDCTL_USER": "other:" + pw}, wantErr: "ETCDCTL_USER"},
		{name: "zookeeper: no variable", url: "zookeeper://h/r", env: map[string]string{"REDISCLI_AUTH": pw, "ETCDCTL_PASSWORD": pw}},
		{name: "postgres: pgx reads PGPASSWORD", url: "postgres://app@h/db", env: map[string]string{"PGPASSWORD": pw}},
		{name: "memory, no file", url: "memory://", env: map[string]string{"REDISCLI_AUTH": pw}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"REDISCLI_AUTH", "ETCDCTL_USER", "ETCDCTL_PASSWORD", "PGPASSWORD"} {
				t.Setenv(k, c.env[k])
			}
			got, err := withCredentials(c.url, c.file)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("withCredentials(%q, %q) = %q, %v; want an error saying %q", c.url, c.file, got, err, c.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr") || strings.Contains(err.Error(), "urlpw") {
					t.Fatalf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("withCredentials(%q, %q): %v", c.url, c.file, err)
			}
			if c.want == "" {
				if got != c.url {
					t.Fatalf("withCredentials(%q, %q) = %q, want the URL unchanged", c.url, c.file, got)
				}
				return
			}
			u := mustParse(t, got)
			user, _ := u.User.Password()
			if info := u.User.Username() + ":" + user; info != c.want {
				t.Fatalf("withCredentials(%q, %q) = %q: user info %q, want %q", c.url, c.file, got, info, c.want)
			}
		})
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return u
}

// bench's --password-file applies to every --backend that takes a
// password; a child lockctl (bench --failover) is told the file, never the
// password, which its command line would show to every user of the machine.
func TestBenchBackends_ChildGetsTheFileNotThePassword(t *testing.T) {
	const pw = "s3cret-pw"
	file := passwordFile(t, pw+"\n")
	t.Setenv("REDISCLI_AUTH", "")
	got, err := benchBackends([]string{"redis://h:6379/0", "memory://", "etcd://app@h/p"}, file)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ password, child string }{
		{pw, "--password-file " + file + " redis://h:6379/0"},
		{"", "memory://"},
		{pw, "--password-file " + file + " etcd://app@h/p"},
	} {
		u := mustParse(t, got[i].url)
		if p, _ := u.User.Password(); p != want.password {
			t.Errorf("backend %d: URL %s has password %q, want %q", i, redact(got[i].url), p, want.password)
		}
		if child := strings.Join(got[i].child, " "); child != want.child {
			t.Errorf("backend %d: child arguments %q, want %q", i, child, want.child)
		}
	}
	if _, err := benchBackends([]string{"memory://"}, file); err == nil || !strings.Contains(err.Error(), "no --backend") {
		t.Errorf("--password-file with memory:// only: %v, want a usage error", err)
	}
}
