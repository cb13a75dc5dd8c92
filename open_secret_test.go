package locker_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/distlock/locker"
)

// secretScheme is a registered scheme whose Opener fails as an unreachable
// backend does, after the URL parsed.
const secretScheme = "secrettest"

func init() {
	locker.Register(secretScheme, func(_ context.Context, u *url.URL, _ []locker.Option) (locker.Locker, error) {
		if u.Query().Has("bad") {
			return nil, fmt.Errorf("%w: query parameter bad: not one of this backend's", locker.ErrInvalidURL)
		}
		return nil, fmt.Errorf("%w: dial %s: connection refused", locker.ErrUnavailable, u.Host)
	})
}

// Every way Open can fail on a URL carrying a password leaves the password
// out of the error: a URL is shown, if at all, as url.URL.Redacted shows it,
// and url.Parse's complaints, which quote the piece they choke on, are not
// repeated when that piece may be part of a password (one with an unescaped
// '/', '?', '#' or '%' cuts the authority where the password is).
func TestOpen_PasswordNeverInError(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		url  string
		want error
	}{
		{"nosuch://u:hunter2@host/", locker.ErrInvalidURL},                      // unknown scheme
		{"redis://u:hunter2@host/", locker.ErrInvalidURL},                       // known scheme, not imported here
		{"memory://u:hunter2@", locker.ErrInvalidURL},                           // a scheme that takes no user
		{"memory://u:hunter2@?ttl=soon", locker.ErrInvalidURL},                  // bad common parameter
		{"memory://u:hunter2@?%yy", locker.ErrInvalidURL},                       // bad query
		{"secrettest://u:hunter2@127.0.0.1:1/?bad=1", locker.ErrInvalidURL},     // the backend's own parameter
		{"secrettest://u:hunter2@127.0.0.1:1/?ttl=1s", locker.ErrUnavailable},   // unreachable
		{"secrettest://u:hunter2/x@127.0.0.1:1/", locker.ErrInvalidURL},         // unescaped '/' in the password
		{"secrettest://u:hunter2?x@127.0.0.1:1/", locker.ErrInvalidURL},         // unescaped '?'
		{"secrettest://u:hunter2#x@127.0.0.1:1/", locker.ErrInvalidURL},         // unescaped '#'
		{"secrettest://u:hun%zzter2@127.0.0.1:1/", locker.ErrInvalidURL},        // bad escape in the password
		{"secrettest://u:hunter2 x@127.0.0.1:1/", locker.ErrInvalidURL},         // space in the password
		{"secrettest://u:hunter2@127.0.0.1:1/\x7f", locker.ErrInvalidURL},       // control character
		{"secrettest://u:hunter2@[::1/", locker.ErrInvalidURL},                  // broken IPv6 host
		{"secrettest://127.0.0.1:1/?password=hun%zzter2", locker.ErrInvalidURL}, // bad escape in a password parameter
	}
	for _, c := range cases {
		l, err := locker.Open(ctx, c.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded, want an error", c.url)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%q) = %v, want %v", c.url, err, c.want)
		}
		for _, piece := range []string{"hunter2", "hunter", "hun", "zzter2", "%zz"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("Open(%q) = %q: shows %q of the password", c.url, err, piece)
				break
			}
		}
	}
}
