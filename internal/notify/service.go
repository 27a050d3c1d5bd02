// Package notify tells humans: it keeps the alert channels (their secrets
// sealed like outbound credentials) and each agent's rules, turns the
// changes the feed processes into notifications (one item per event and
// channel, created once), and delivers them at least once with retries,
// backoff and per-channel dead letters, apart from the lapse tasks so that
// a slow receiver never delays one. The decisions are internal/alert's.
package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/breaker"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store"
)

// sealAgent is the agent under which channel secrets are sealed (the
// scheme is the channel id): no card's credentials are sealed under it.
const sealAgent = "clockwork:channel"

// MailSender sends one plain-text e-mail (SMTP on the embedded default,
// Amazon SES on AWS).
type MailSender interface {
	SendMail(ctx context.Context, to []string, m alert.Mail) error
}

// EventPutter puts one event on an EventBridge bus (AWS only).
type EventPutter interface {
	PutEvent(ctx context.Context, bus, detailType string, detail []byte, at time.Time) error
}

// Enqueuer is told of each notification to attempt: the embedded worker
// pool, or on AWS the timer queue.
type Enqueuer interface {
	EnqueueNotification(ctx context.Context, agentID, id string, at time.Time) error
}

// Options configure a Service.
type Options struct {
	// ScoresChannel names an operator's channel (an otlp one, typically)
	// that every agent's verification.completed goes to, besides the
	// agents' own rules: -scores-channel, SCORES_CHANNEL ("": none).
	ScoresChannel string
	// RetryFor is how long failed notifications are retried, from the
	// first failure, before they are dead-lettered (default
	// retry.DefaultFor, a day).
	RetryFor time.Duration
	// MaxAttempts, when positive, also dead-letters a notification after
	// that many sends (default 0: the window alone).
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the waits between attempts (see
	// retry.Policy: defaults 1s and 1h).
	BaseBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one send (default 10s).
	AttemptTimeout time.Duration
	// PublicURL is the server's public base URL, for console links in
	// Slack, e-mail and PagerDuty ("": no links).
	PublicURL string
	// InsecureURLs accepts http:// destinations (set with private
	// destinations allowed, for loopback receivers).
	InsecureURLs bool
	// Retain is how long a delivered or dead-lettered notification is kept
	// (-retain-expectations); zero keeps it forever.
	Retain time.Duration
	// ClaimSends has each attempt claim its send in the store first
	// (store.Claim), so that attempts at one notification made by
	// different processes at once (on AWS, a duplicated timer message or
	// stream record reaching two function instances) send it once. In one
	// process the worker never runs two at once without it.
	ClaimSends bool
	Metrics    metrics.Recorder
	Now        func() time.Time
	// Expectation reads an expectation record (an error matching
	// errs.NotFound when there is none), for the conditions of reminders,
	// repeats and escalations (alert.Condition). Without it they are sent
	// unconditionally.
	Expectation func(ctx context.Context, agentID, id string) (*expect.Record, error)
	// MinRepeat is the shortest repeat.every a rule may ask for (default
	// DefaultMinRepeat): one lapse repeated that often on a shared channel
	// is a flood every tenant of the channel waits behind.
	MinRepeat time.Duration
}

// DefaultMinRepeat is Options.MinRepeat's default.
const DefaultMinRepeat = time.Minute

// Service is the alerting service. It is safe for concurrent use.
type Service struct {
	store  store.Store
	sealer credentials.Sealer
	http   *http.Client
	mail   MailSender
	events EventPutter
	queue  Enqueuer
	opt    Options
	log    *slog.Logger

	policy   retry.Policy
	circuits *breaker.Breakers

	mu       sync.Mutex
	secrets  map[string]cachedSecret
	tests    map[string]time.Time // last test per channel (testInterval)
	rules    rulesCache           // for reminders (cachedRules)
	silences silenceCache         // checked before every send (activeSilence)
}

// testInterval is the least time between two tests of one channel in one
// process: a test sends at once, inside the request.
const testInterval = 2 * time.Second

// New returns a Service. client sends webhooks, Slack and PagerDuty (a
// guarded client: internal/netguard); redirects are never followed (a 3xx
// answer is a failed attempt), so no secret-bearing request is replayed
// elsewhere. mail and events may be nil (no e-mail, no EventBridge
// channels). sealer nil makes channels with secrets fail to save.
func New(st store.Store, sealer credentials.Sealer, client *http.Client, mail MailSender, events EventPutter, opt Options, log *slog.Logger) *Service {
	if opt.MinRepeat <= 0 {
		opt.MinRepeat = DefaultMinRepeat
	}
	if opt.AttemptTimeout <= 0 {
		opt.AttemptTimeout = 10 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Metrics = metrics.Or(opt.Metrics)
	if client != nil {
		c := *client
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		client = &c
	}
	policy := retry.Policy{For: opt.RetryFor, Base: opt.BaseBackoff, Ceiling: opt.MaxBackoff, MaxAttempts: opt.MaxAttempts}.WithDefaults()
	return &Service{store: st, sealer: sealer, http: client, mail: mail, events: events, opt: opt, log: log, secrets: map[string]cachedSecret{}, tests: map[string]time.Time{},
		policy: policy, circuits: breaker.New(st, opt.Now, policy, opt.AttemptTimeout+probeMargin)}
}

// SetEnqueuer sets who is told of new and retried notifications.
func (s *Service) SetEnqueuer(q Enqueuer) { s.queue = q }

// Capabilities says which channel types this service can send.
func (s *Service) Capabilities() alert.Capabilities {
	return alert.Capabilities{EventBridge: s.events != nil, Email: s.mail != nil, InsecureURLs: s.opt.InsecureURLs}
}

// ChannelView is a channel as the API shows it: never its secret, except
// a generated webhook secret in the answer to the PUT that made it.
type ChannelView struct {
	alert.Channel
	Secret string `json:"secret,omitempty"`
}

// Limits on channels: per owner (the agents of the creating token) and in
// all, so one tenant cannot slow everyone's listing or fill the table.
const (
	MaxChannelsPerOwner = 100
	MaxChannels         = 10000
)

// PutChannel creates or replaces channel id for a principal acting for
// agents. Errors: Invalid naming the field; NotFound when the id is a
// channel the principal may not change (as if it did not exist); Conflict
// when it is a channel of other owners the principal could change (an
// operator writing over a tenant's channel: DELETE it first), or when the
// owner has MaxChannelsPerOwner channels; Unavailable when the secret
// cannot be sealed.
func (s *Service) PutChannel(ctx context.Context, agents []string, id string, body []byte) (ChannelView, bool, error) {
	ch, sec, generated, err := alert.ParseChannel(id, body, s.Capabilities())
	if err != nil {
		return ChannelView{}, false, err
	}
	// An operator's channel is shared unless it says otherwise; a
	// tenant's stays its own.
	operator := slices.Contains(agents, "*")
	if ch.Shared != nil && *ch.Shared && !operator {
		return ChannelView{}, false, errs.Fields("the channel is not valid", []errs.FieldError{{Path: "shared",
			Message: "only an operator (a token acting for every agent) may share a channel; a tenant's channel serves its own agents"}})
	}
	shared := operator && (ch.Shared == nil || *ch.Shared)
	ch.Shared = &shared
	existing, err := s.channel(ctx, id)
	switch {
	case errs.Is(err, errs.NotFound):
		if err := s.checkRoom(ctx, agents); err != nil {
			return ChannelView{}, false, err
		}
	case err != nil:
		return ChannelView{}, false, err
	default:
		if err := replaceable(&existing.Channel, agents, id); err != nil {
			return ChannelView{}, false, err
		}
	}
	var sealed []byte
	if !sec.Empty() {
		if s.sealer == nil {
			return ChannelView{}, false, errs.E(errs.Unavailable, "this process holds no key to seal channel secrets")
		}
		plain, _ := json.Marshal(sec)
		sealed, err = s.sealer.Seal(ctx, plain, sealAgent, id)
		clear(plain)
		if err != nil {
			return ChannelView{}, false, errs.E(errs.Unavailable, "the channel's secret could not be sealed; try again")
		}
	}
	now := expect.FormatTime(s.opt.Now())
	created := false
	var out alert.Channel
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, channelKey(id))
		if err != nil {
			return err
		}
		next := storedChannel{Channel: ch, Sealed: sealed}
		next.Owners = slices.Clone(agents)
		next.CreatedAt, next.UpdatedAt = now, now
		next.Incarnation = newIncarnation()
		created = !ok
		if ok {
			var cur storedChannel
			if err := json.Unmarshal(it.Data, &cur); err != nil {
				return err
			}
			if err := replaceable(&cur.Channel, agents, id); err != nil {
				return err
			}
			next.Owners, next.CreatedAt, next.Incarnation = cur.Owners, cur.CreatedAt, cur.Incarnation
		}
		item, err := channelItem(next)
		if err != nil {
			return err
		}
		tx.Put(item)
		out = next.Channel
		return nil
	})
	if err != nil {
		return ChannelView{}, false, err
	}
	v := ChannelView{Channel: out}
	if generated {
		v.Secret = sec.WebhookSecret
	}
	return v, created, nil
}

// replaceable says whether a principal acting for agents may replace c.
func replaceable(c *alert.Channel, agents []string, id string) error {
	if !c.ManageableBy(agents) {
		return errs.E(errs.NotFound, "no channel %q that this token may change", id)
	}
	if !c.SameOwners(agents) {
		return errs.E(errs.Conflict, "channel %q belongs to agents %v, not to this token's agents: DELETE it first, or choose another id", id, c.Owners)
	}
	return nil
}

// checkRoom refuses a new channel past the limits.
func (s *Service) checkRoom(ctx context.Context, agents []string) error {
	all, err := s.Channels(ctx, []string{"*"})
	if err != nil {
		return err
	}
	if len(all) >= MaxChannels {
		return errs.E(errs.Conflict, "this server holds %d channels, the most it keeps; delete some first", MaxChannels)
	}
	mine := 0
	for i := range all {
		if all[i].SameOwners(agents) {
			mine++
		}
	}
	if mine >= MaxChannelsPerOwner {
		return errs.E(errs.Conflict, "this token's agents own %d channels, the most they may; delete some first", MaxChannelsPerOwner)
	}
	return nil
}

func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// channel reads channel id with its sealed secret. Errors: NotFound.
func (s *Service) channel(ctx context.Context, id string) (storedChannel, error) {
	var c storedChannel
	if alert.ValidChannelID(id) != "" {
		return c, errs.E(errs.NotFound, "no channel %q", id)
	}
	it, err := s.store.Get(ctx, channelKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return c, errs.E(errs.NotFound, "no channel %q", id)
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(it.Data, &c); err != nil {
		return c, err
	}
	return c, nil
}

// Channel returns channel id if a principal acting for agents may see it,
// or its id, type and name (alert.Channel.Redacted) when it may only use
// it (a shared channel it does not own). Errors: NotFound (also for
// another tenant's channel).
func (s *Service) Channel(ctx context.Context, agents []string, id string) (alert.Channel, error) {
	c, err := s.channel(ctx, id)
	if err != nil {
		return alert.Channel{}, err
	}
	switch {
	case c.VisibleTo(agents):
		return c.Channel.WithSharing(), nil
	case c.UsableBy(agents):
		return c.Redacted(), nil
	}
	return alert.Channel{}, errs.E(errs.NotFound, "no channel %q", id)
}

// Channels lists the channels a principal acting for agents may see, by
// id, and the shared ones it may only use, redacted as Channel does.
func (s *Service) Channels(ctx context.Context, agents []string) ([]alert.Channel, error) {
	out := []alert.Channel{}
	q := store.Query{Index: store.GSI5, PK: channelsPK, Limit: store.MaxLimit}
	for {
		p, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			var c storedChannel
			if json.Unmarshal(it.Data, &c) != nil {
				continue
			}
			switch {
			case c.VisibleTo(agents):
				out = append(out, c.Channel.WithSharing())
			case c.UsableBy(agents):
				out = append(out, c.Redacted())
			}
		}
		if p.Next == "" {
			return out, nil
		}
		q.After = p.Next
	}
}

// DeleteChannel removes channel id. Notifications still waiting for it
// are dead-lettered at their next attempt ("channel deleted"). Errors:
// NotFound (also for a channel the principal may not change).
func (s *Service) DeleteChannel(ctx context.Context, agents []string, id string) error {
	if alert.ValidChannelID(id) != "" {
		return errs.E(errs.NotFound, "no channel %q", id)
	}
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, channelKey(id))
		if err != nil {
			return err
		}
		var cur storedChannel
		if ok {
			err = json.Unmarshal(it.Data, &cur)
		}
		if !ok || err != nil || !cur.ManageableBy(agents) {
			return errs.E(errs.NotFound, "no channel %q that this token may change", id)
		}
		tx.Delete(channelKey(id))
		return nil
	})
}

// TestResult says how a channel.test went.
type TestResult struct {
	ChannelID string `json:"channelId"`
	Delivered bool   `json:"delivered"`
	Error     string `json:"error,omitempty"`
	// NotificationID is the test notification's id (its webhook-id).
	NotificationID string `json:"notificationId"`
}

// TestChannel sends a channel.test event to channel id now, once, and says
// how it went (a failed send is an answer, not an error). Errors: NotFound.
func (s *Service) TestChannel(ctx context.Context, agents []string, id string) (TestResult, error) {
	c, err := s.channel(ctx, id)
	if err != nil {
		return TestResult{}, err
	}
	if !c.VisibleTo(agents) {
		return TestResult{}, errs.E(errs.NotFound, "no channel %q", id)
	}
	s.mu.Lock()
	last, tested := s.tests[id]
	if tested && time.Since(last) < testInterval {
		s.mu.Unlock()
		return TestResult{}, errs.E(errs.TooManyRequests, "channel %q was tested less than %v ago; try again after", id, testInterval)
	}
	if len(s.tests) > 10000 {
		clear(s.tests)
	}
	s.tests[id] = time.Now()
	s.mu.Unlock()
	now := s.opt.Now()
	n := &alert.Notification{
		ID: alert.NotificationID("test\x00"+expect.FormatTime(now), "", id), ChannelID: id, ChannelType: c.Type,
		Event:    alert.Event{Type: alert.ChannelTest, Timestamp: expect.FormatTime(now), Data: alert.EventData{ChannelID: id}},
		DedupKey: alert.DedupKey("", "test\x00"+id), CreatedAt: expect.FormatTime(now),
	}
	res := TestResult{ChannelID: id, NotificationID: n.ID}
	if err := s.send(ctx, c, n); err != nil {
		res.Error = describe(err)
		return res, nil
	}
	res.Delivered = true
	return res, nil
}

// EraseOwner removes, once agent is erased, the channels that only it and
// other agents that no longer remain owned (remains says whether an agent
// still has a card): a tenant's channels go with the last of its agents.
// An operator's channels stay. What waited for a removed channel is
// dead-lettered as for any deleted channel. It returns how many it
// removed. Errors: the store's and remains'.
func (s *Service) EraseOwner(ctx context.Context, agent string, remains func(context.Context, string) (bool, error)) (int, error) {
	all, err := s.Channels(ctx, []string{"*"})
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, c := range all {
		if !slices.Contains(c.Owners, agent) || slices.Contains(c.Owners, "*") {
			continue
		}
		orphan := true
		for _, o := range c.Owners {
			if o == agent {
				continue
			}
			ok, err := remains(ctx, o)
			if err != nil {
				return removed, err
			}
			if ok {
				orphan = false
				break
			}
		}
		if !orphan {
			continue
		}
		if err := s.DeleteChannel(ctx, c.Owners, c.ID); err != nil && !errs.Is(err, errs.NotFound) {
			return removed, err
		}
		removed++
	}
	return removed, nil
}
