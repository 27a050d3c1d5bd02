package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// DefaultCacheTTL is how long Load keeps decrypted secrets in memory when
// Options.CacheTTL is zero.
const DefaultCacheTTL = 5 * time.Minute

// stored is the credentials item's body: each scheme's secret sealed
// separately (JSON of Secret, sealed for the agent and scheme), and the
// scheme's type in clear for listing.
type stored struct {
	Schemes map[string]storedScheme `json:"schemes"`
	// Dropped are the schemes whose credentials a card change removed, with
	// why and when, until the next PUT of credentials.
	Dropped map[string]Dropped `json:"dropped,omitempty"`
}

type storedScheme struct {
	Type   string `json:"type"`
	Sealed []byte `json:"sealed"`
	// Bound is the card's CredentialBinding of the scheme at the PUT.
	Bound string `json:"bound,omitempty"`
}

// Dropped says why a scheme's credentials were removed.
type Dropped struct {
	Scheme string `json:"scheme"`
	Reason string `json:"reason"`
	At     string `json:"at"`
}

// Options configure a Service.
type Options struct {
	// CacheTTL bounds how long decrypted secrets stay in memory (zero means
	// DefaultCacheTTL, negative no cache). A new PUT is seen at once
	// whatever the TTL: the cache is keyed by the item's version.
	CacheTTL time.Duration
	// Now is the clock of the cache (default time.Now).
	Now func() time.Time
}

// Service stores, lists, removes and loads agents' credentials. It is safe
// for concurrent use.
type Service struct {
	store  store.Store
	sealer Sealer
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cachedSet
}

type cachedSet struct {
	version int64
	at      time.Time
	set     Set
}

// New returns a Service over st sealing with sealer. A nil sealer makes
// Put and Load fail with an Unavailable error (the process cannot seal or
// open secrets), while Configured and Delete work.
func New(st store.Store, sealer Sealer, opt Options) *Service {
	if opt.CacheTTL == 0 {
		opt.CacheTTL = DefaultCacheTTL
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Service{store: st, sealer: sealer, ttl: opt.CacheTTL, now: opt.Now, cache: map[string]cachedSet{}}
}

// Put replaces the agent's credentials with those in body (see Parse),
// checked against card, sealing each scheme's secret, and returns the
// configured scheme names, sorted. Errors: an Invalid error naming the
// failing fields, an Unavailable error when sealing fails (KMS down), or a
// store error.
func (s *Service) Put(ctx context.Context, card expect.Card, body []byte) ([]string, error) {
	set, err := Parse(card, body)
	if err != nil {
		return nil, err
	}
	if s.sealer == nil {
		return nil, errs.E(errs.Unavailable, "this process holds no key to seal credentials")
	}
	doc := stored{Schemes: map[string]storedScheme{}}
	for name, secret := range set {
		plain, err := json.Marshal(secret)
		if err != nil {
			return nil, err
		}
		sealed, err := s.sealer.Seal(ctx, plain, card.AgentID, name)
		clear(plain)
		if err != nil {
			return nil, errs.E(errs.Unavailable, "credentials could not be sealed; try again")
		}
		doc.Schemes[name] = storedScheme{Type: card.SecuritySchemes[name].Type, Sealed: sealed, Bound: card.CredentialBinding(name)}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	key := watcher.CredentialsKey(card.AgentID)
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, _, err := tx.Get(ctx, key)
		if err != nil {
			return err
		}
		it.Key, it.Type, it.Data, it.Index = key, watcher.TypeCredentials, data, nil
		tx.Put(it)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("credentials: store: %w", err)
	}
	return set.Names(), nil
}

// Configured returns the scheme names the agent has credentials for,
// sorted (empty when none). It reads no secret. Errors are the store's.
func (s *Service) Configured(ctx context.Context, agentID string) ([]string, error) {
	it, err := s.store.Get(ctx, watcher.CredentialsKey(agentID))
	if errors.Is(err, store.ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: store: %w", err)
	}
	var doc stored
	if err := json.Unmarshal(it.Data, &doc); err != nil {
		return nil, fmt.Errorf("credentials: stored item of %q is malformed", agentID)
	}
	names := make([]string, 0, len(doc.Schemes))
	for n := range doc.Schemes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// DropUnbound removes the credentials of every scheme that card no longer
// binds where they were stored for (its A2A endpoint's origin, or the
// scheme's token or discovery URL, changed; or the scheme is gone or of
// another type), so that a re-pointed card never receives them, and records
// each as Dropped. It returns what it dropped, by scheme name (none: nil).
// Errors are the store's.
func (s *Service) DropUnbound(ctx context.Context, card expect.Card) ([]Dropped, error) {
	key := watcher.CredentialsKey(card.AgentID)
	var out []Dropped
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		out = nil
		it, ok, err := tx.Get(ctx, key)
		if err != nil || !ok {
			return err
		}
		var doc stored
		if err := json.Unmarshal(it.Data, &doc); err != nil {
			return fmt.Errorf("credentials: stored item of %q is malformed", card.AgentID)
		}
		for _, name := range sortedNames(doc.Schemes) {
			now := card.CredentialBinding(name)
			if was := doc.Schemes[name].Bound; now != "" && was == now {
				continue
			}
			reason := "the card no longer declares the scheme"
			if now != "" {
				reason = "the card's endpoint, token URL or discovery URL changed: " + describeBinding(doc.Schemes[name].Bound) + " became " + now
			}
			d := Dropped{Scheme: name, Reason: reason, At: s.now().UTC().Format(time.RFC3339)}
			out = append(out, d)
			if doc.Dropped == nil {
				doc.Dropped = map[string]Dropped{}
			}
			doc.Dropped[name] = d
			delete(doc.Schemes, name)
		}
		if len(out) == 0 {
			return nil
		}
		data, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		it.Data = data
		tx.Put(it)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("credentials: store: %w", err)
	}
	if len(out) > 0 {
		s.mu.Lock()
		delete(s.cache, card.AgentID)
		s.mu.Unlock()
	}
	return out, nil
}

func describeBinding(b string) string {
	if b == "" {
		return "(stored before credentials were bound)"
	}
	return b
}

// DroppedOf returns the schemes whose credentials a card change dropped
// since the last PUT of credentials, sorted by scheme. Errors are the
// store's.
func (s *Service) DroppedOf(ctx context.Context, agentID string) ([]Dropped, error) {
	it, err := s.store.Get(ctx, watcher.CredentialsKey(agentID))
	if errors.Is(err, store.ErrNotFound) {
		return []Dropped{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: store: %w", err)
	}
	var doc stored
	if err := json.Unmarshal(it.Data, &doc); err != nil {
		return nil, fmt.Errorf("credentials: stored item of %q is malformed", agentID)
	}
	out := []Dropped{}
	for _, name := range sortedNames(doc.Dropped) {
		out = append(out, doc.Dropped[name])
	}
	return out, nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Delete removes the agent's credentials; removing none is not an error.
// Errors are the store's.
func (s *Service) Delete(ctx context.Context, agentID string) error {
	key := watcher.CredentialsKey(agentID)
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		if _, ok, err := tx.Get(ctx, key); err != nil || !ok {
			return err
		}
		tx.Delete(key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("credentials: store: %w", err)
	}
	s.mu.Lock()
	delete(s.cache, agentID)
	s.mu.Unlock()
	return nil
}

// Load returns the agent's secrets, decrypted (an empty Set when none are
// configured). It reads the item every time, so a new PUT is used by the
// next delivery, and decrypts only when the item changed or the cached
// copy is older than the cache TTL. Errors: a store error, or an
// Unavailable error when a secret does not open (wrong key, KMS refused or
// down); the message names the scheme, never a value.
func (s *Service) Load(ctx context.Context, agentID string) (Set, error) {
	it, err := s.store.Get(ctx, watcher.CredentialsKey(agentID))
	if errors.Is(err, store.ErrNotFound) {
		return Set{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: store: %w", err)
	}
	now := s.now()
	if s.ttl > 0 {
		s.mu.Lock()
		c, ok := s.cache[agentID]
		s.mu.Unlock()
		if ok && c.version == it.Version && now.Sub(c.at) < s.ttl {
			return c.set, nil
		}
	}
	if s.sealer == nil {
		return nil, errs.E(errs.Unavailable, "this process holds no key to open credentials")
	}
	var doc stored
	if err := json.Unmarshal(it.Data, &doc); err != nil {
		return nil, fmt.Errorf("credentials: stored item of %q is malformed", agentID)
	}
	set := make(Set, len(doc.Schemes))
	for name, sc := range doc.Schemes {
		plain, err := s.sealer.Open(ctx, sc.Sealed, agentID, name)
		if err != nil {
			return nil, errs.E(errs.Unavailable, "credentials for scheme %q of agent %q do not open: %v", name, agentID, err)
		}
		var secret Secret
		err = json.Unmarshal(plain, &secret)
		clear(plain)
		if err != nil {
			return nil, errs.E(errs.Unavailable, "credentials for scheme %q of agent %q are malformed", name, agentID)
		}
		secret.Bound = sc.Bound
		set[name] = secret
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.cache) > 10000 {
			clear(s.cache)
		}
		s.cache[agentID] = cachedSet{version: it.Version, at: now, set: set}
		s.mu.Unlock()
	}
	return set, nil
}
