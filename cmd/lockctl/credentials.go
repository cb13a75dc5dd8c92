package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// credentialsHelp is the usage text on credentials, shared by every
// subcommand that opens a backend.
const credentialsHelp = `Credentials: a password comes from the URL (scheme://user:password@host…,
percent-encoded) or from --password-file FILE (its first line) — not both:
lockctl refuses to guess which one is meant. Without either, it comes from
the engine's own environment variable: REDISCLI_AUTH for redis, rediss and
redlock (redis-cli's); ETCDCTL_USER ("user:password", or the user name when
ETCDCTL_PASSWORD is set) and ETCDCTL_PASSWORD for etcd (etcdctl's; the user
name also applies with --password-file when the URL names none);
PGPASSWORD, PGUSER and ~/.pgpass for postgres, read by the driver itself.
ZooKeeper has no such variable: give user:password in the URL or the
password with --password-file. memory:// takes no password (--password-file
with it is a usage error); bench applies the file to every --backend that
takes one. No secret is needed on the command line, and lockctl shows none:
URLs it prints are redacted, and the command it runs gets no password from
lockctl (it inherits lockctl's environment as it is).
`

// passwordSchemes are the URL schemes of lockctl's backends that take a
// password; the others (memory) take none.
var passwordSchemes = map[string]bool{
	"redis": true, "rediss": true, "redlock": true,
	"etcd": true, "zookeeper": true, "postgres": true, "postgresql": true,
}

// passwordFileFlag adds --password-file to fset.
func passwordFileFlag(fset *flag.FlagSet) *string {
	return fset.String("password-file", "", "read the backend's password from the first line of this file (see Credentials below)")
}

// errNoPassword is withCredentials's answer for a scheme that takes no
// password, given one in a file.
var errNoPassword = errors.New("takes no password")

// withCredentials returns rawURL with the password from passwordFile, or
// else from the engine's environment variable, set into its user info, where
// the backends read it: see credentialsHelp for the rules. Its errors are
// usage errors and never hold the password. A URL that does not parse is
// returned as it is, for locker.Open to report.
func withCredentials(rawURL, passwordFile string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL, nil
	}
	scheme := strings.ToLower(u.Scheme)
	var user string
	urlHasPassword := false
	if u.User != nil {
		user = u.User.Username()
		_, urlHasPassword = u.User.Password()
	}
	for k := range u.Query() {
		// libpq's URL may carry password= (and sslpassword=) as parameters.
		urlHasPassword = urlHasPassword || strings.Contains(strings.ToLower(k), "password")
	}

	var password string
	switch {
	case passwordFile != "" && !passwordSchemes[scheme]:
		return "", fmt.Errorf("--password-file: %s:// %w", scheme, errNoPassword)
	case passwordFile != "" && urlHasPassword:
		return "", errors.New("--password-file: the URL has a password already; give it one way, not two")
	case passwordFile != "":
		if password, err = readPassword(passwordFile); err != nil {
			return "", err
		}
	case urlHasPassword || !passwordSchemes[scheme]:
		return rawURL, nil
	}

	switch scheme {
	case "redis", "rediss", "redlock":
		if password == "" {
			password = os.Getenv("REDISCLI_AUTH")
		}
	case "etcd":
		envUser, envPassword := os.Getenv("ETCDCTL_USER"), os.Getenv("ETCDCTL_PASSWORD")
		if name, pw, ok := strings.Cut(envUser, ":"); ok && envPassword == "" {
			envUser, envPassword = name, pw
		}
		if password == "" {
			if envPassword != "" && user != "" && envUser != "" && envUser != user {
				return "", fmt.Errorf("the URL names etcd user %q but ETCDCTL_USER names %q: whose password is ETCDCTL's?", user, envUser)
			}
			password = envPassword
		}
		if user == "" {
			user = envUser
		}
	}
	if password == "" {
		return rawURL, nil // postgres (the driver reads its variables), or nothing set
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// readPassword reads the first line of path, without its line ending.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("--password-file: %s: the first line is empty", path)
	}
	return line, nil
}

// redact returns s, a URL or a command-line argument that may hold one
// ("--backend=URL"), with the password shown as url.URL.Redacted shows it,
// and password query parameters masked too. A URL that does not parse is
// masked from its user info's first ':' to its last '@', and in its
// password parameters. It is lockctl's one redaction: every URL lockctl
// prints goes through it.
func redact(s string) string {
	if name, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(name, "-") {
		return name + "=" + redact(v)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		_, rest, _ = strings.Cut(u.Redacted(), "://")
	} else if err != nil {
		at := strings.LastIndexByte(rest, '@')
		if colon := strings.IndexByte(rest, ':'); at >= 0 && colon >= 0 && colon < at {
			rest = rest[:colon] + ":xxxxx" + rest[at:]
		}
	}
	// The query as written: url.Values would drop a pair it cannot decode.
	if base, query, ok := strings.Cut(rest, "?"); ok {
		params := strings.Split(query, "&")
		for i, kv := range params {
			if k, _, ok := strings.Cut(kv, "="); ok && strings.Contains(strings.ToLower(k), "password") {
				params[i] = k + "=xxxxx"
			}
		}
		rest = base + "?" + strings.Join(params, "&")
	}
	return scheme + "://" + rest
}

// redactArgs is args, redacted and joined by spaces, as in a report's
// command line.
func redactArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redact(a)
	}
	return strings.Join(out, " ")
}

// benchBackend is a backend bench measures: its URL with credentials, for
// locker.Open, and the arguments that name it to a child lockctl (bench
// --failover): the URL as given and --password-file, never the password
// itself, which the process list would show.
type benchBackend struct {
	url   string
	child []string
}

// benchBackends gives each --backend URL its credentials; passwordFile, if
// set, applies to every one whose scheme takes a password, and to one at
// least.
func benchBackends(urls []string, passwordFile string) ([]benchBackend, error) {
	out := plainBackends(urls)
	used := false
	for i, raw := range urls {
		file := passwordFile
		if u, err := url.Parse(raw); err == nil && !passwordSchemes[strings.ToLower(u.Scheme)] {
			file = ""
		}
		withURL, err := withCredentials(raw, file)
		if err != nil {
			return nil, fmt.Errorf("--backend %s: %w", redact(raw), err)
		}
		out[i].url = withURL
		if file != "" {
			used = true
			out[i].child = []string{"--password-file", file, raw}
		}
	}
	if passwordFile != "" && !used {
		return nil, errors.New("--password-file: no --backend URL takes a password")
	}
	return out, nil
}

// plainBackends are urls as they are, without credentials from elsewhere.
func plainBackends(urls []string) []benchBackend {
	out := make([]benchBackend, len(urls))
	for i, u := range urls {
		out[i] = benchBackend{url: u, child: []string{u}}
	}
	return out
}
