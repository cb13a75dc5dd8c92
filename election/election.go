package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/locker"
)

// ErrNoLeader is returned by Leader when nobody leads the election.
var ErrNoLeader = errors.New("election: no leader")

// Election is one candidate's handle on a named election over a Locker. It
// is safe for concurrent use; its methods are independent of each other (a
// candidate may observe while it campaigns).
type Election struct {
	l     locker.Locker
	name  string
	ttl   time.Duration // 0: the Locker's
	label string        // "": the Locker's owner label
	log   *slog.Logger
}

// Leader is who leads an election, as the backend records it.
type Leader struct {
	// Label is the leader's candidate label (WithLabel, or the Locker's
	// owner label).
	Label string
	// Value is the value the leader campaigned with or last proclaimed.
	Value string
	// Token is the term's fencing token: strictly larger for every later
	// term of the election.
	Token uint64
	// Since is when the term began, on the server's clock; zero where the
	// backend does not record it.
	Since time.Time
}

// An Option configures an Election.
type Option func(*Election) error

// WithTTL sets the TTL of the lease that carries a term (default: the
// Locker's). The term refreshes itself every third of it; a leader that
// stops refreshing — crashed, paused, cut off — is replaced within about a
// TTL. It must be at least locker.MinTTL; the backend may round it up.
func WithTTL(d time.Duration) Option {
	return func(e *Election) error {
		if d < locker.MinTTL {
			return fmt.Errorf("%w: TTL %v is shorter than the minimum %v", locker.ErrInvalidOption, d, locker.MinTTL)
		}
		e.ttl = d
		return nil
	}
}

// WithLabel sets the candidate's label, shown as Leader.Label (default: the
// Locker's owner label). It identifies the candidate to people; the term's
// token, not the label, tells leaders apart.
func WithLabel(label string) Option {
	return func(e *Election) error {
		if len(label) > locker.MaxKeyLen {
			return fmt.Errorf("%w: label of %d bytes, more than %d", locker.ErrInvalidOption, len(label), locker.MaxKeyLen)
		}
		e.label = label
		return nil
	}
}

// WithLogger sets where the election logs what it does in the background:
// campaigns retried by Run, leadership lost, watches Observe starts again.
// Logging is off by default.
func WithLogger(l *slog.Logger) Option {
	return func(e *Election) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", locker.ErrInvalidOption)
		}
		e.log = l
		return nil
	}
}

// New returns a candidate's handle on the election called name, held on l
// as the lock called name in l's key space. Every candidate and observer
// of one election uses the same name on a Locker of the same lock service.
// A name that is no valid key is refused with an error wrapping
// locker.ErrInvalidKey, a bad option with locker.ErrInvalidOption.
func New(l locker.Locker, name string, opts ...Option) (*Election, error) {
	if l == nil {
		return nil, fmt.Errorf("election: new %q: %w: nil Locker", name, locker.ErrInvalidOption)
	}
	if err := locker.ValidateKey(name); err != nil {
		return nil, fmt.Errorf("election: new %q: name: %w", name, err)
	}
	e := &Election{l: l, name: name, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(e); err != nil {
			return nil, fmt.Errorf("election: new %q: %w", name, err)
		}
	}
	return e, nil
}

// Name is the election's name: the key of its lock.
func (e *Election) Name() string { return e.name }

// Campaign blocks until this candidate leads, ctx ends, or the backend
// fails, and returns the term. Candidates are served as the backend serves
// waiters for a lock (in arrival order on most). A non-empty value is
// published with the term, shown by Leader and Observe; a backend that
// cannot publish refuses it with locker.ErrUnsupported. A campaign that ends
// without the lead leaves nothing behind on the backend.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	opts := []locker.Option{locker.WithAutoRefresh(true)}
	if e.ttl > 0 {
		opts = append(opts, locker.WithTTL(e.ttl))
	}
	if e.label != "" {
		opts = append(opts, locker.WithOwner(e.label))
	}
	if value != "" {
		opts = append(opts, locker.WithValue(value))
	}
	lease, err := e.l.Acquire(ctx, e.name, opts...)
	if err != nil {
		return nil, fmt.Errorf("election %q: campaign: %w", e.name, err)
	}
	return &Term{e: e, lease: lease, value: value}, nil
}

// Leader tells who leads the election now, or returns ErrNoLeader. It needs
// a backend that can inspect its locks (locker.Inspect), else it returns
// locker.ErrUnsupported.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	info, err := locker.Inspect(ctx, e.l, e.name)
	if err != nil {
		return Leader{}, fmt.Errorf("election %q: leader: %w", e.name, err)
	}
	if !info.Held {
		return Leader{}, fmt.Errorf("election %q: %w", e.name, ErrNoLeader)
	}
	return leaderOf(info), nil
}

func leaderOf(info locker.LockInfo) Leader {
	return Leader{Label: info.Owner, Value: info.Value, Token: info.Token, Since: info.Granted}
}

// permanent reports whether err, from a campaign or a watch, will not go
// away by trying again.
func permanent(err error) bool {
	for _, p := range []error{locker.ErrClosed, locker.ErrUnsupported, locker.ErrInvalidKey, locker.ErrInvalidOption} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
