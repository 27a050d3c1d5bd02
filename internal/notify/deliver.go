package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store"
)

// permanentError is a send failure no retry can mend (the channel is gone,
// the destination is refused by the guard, the receiver rejected the
// request as malformed).
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(err error) error { return permanentError{err} }

// claimSend claims the next attempt at n (Options.ClaimSends) and reports
// whether this caller holds it and n, read again after the claim, still
// awaits that attempt (so that a caller that read n before another's
// attempt was recorded does not send it again).
func (s *Service) claimSend(ctx context.Context, n *alert.Notification) (bool, error) {
	held, err := store.Claim(ctx, s.store, sendClaimKey(n), s.opt.AttemptTimeout+store.ClaimMargin)
	if err != nil || !held {
		return false, err
	}
	it, err := s.store.Get(ctx, notificationKey(n.AgentID, n.ID))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cur, err := decodeNotification(it)
	if err != nil {
		return false, err
	}
	return cur.Pending() && cur.Attempts == n.Attempts && cur.Replays == n.Replays, nil
}

// Attempt makes one delivery attempt of notification id of agent and says
// whether (and after how long) to try again. The outcome is committed on
// the notification; its change is what schedules the next attempt.
func (s *Service) Attempt(ctx context.Context, agent, id string) (time.Duration, bool) {
	it, err := s.store.Get(ctx, notificationKey(agent, id))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return s.storeRetry(), true
		}
		return 0, false
	}
	n, err := decodeNotification(it)
	if err != nil || !n.Pending() {
		return 0, false
	}
	if wait := n.Wait(s.opt.Now()); wait > 0 {
		return wait, true
	}
	// A reminder, repeat or escalation goes only if its condition still
	// holds of the expectation.
	if n.Condition != "" && s.opt.Expectation != nil {
		rec, err := s.opt.Expectation(ctx, agent, n.About.ExpectationID)
		if errs.Is(err, errs.NotFound) {
			rec, err = nil, nil
		}
		if err != nil {
			return s.storeRetry(), true
		}
		if ok, why := n.Condition.Holds(rec, n); !ok {
			return s.skip(ctx, agent, id, string(n.ChannelType), why, "")
		}
	}
	// A silence holds it back: recorded, not sent (a lapse's later
	// repeats still come, and go once the silence is over).
	if n.Event.Type != alert.ChannelTest {
		sil, err := s.activeSilence(ctx, agent, n.About, s.opt.Now(), false)
		if err != nil {
			return s.storeRetry(), true
		}
		if sil != nil {
			return s.skip(ctx, agent, id, string(n.ChannelType), sil.String(), sil.ID)
		}
	}
	// The channel's circuit before the claim: a wait is recorded on the
	// notification (a conditional write of its own) and claims nothing.
	circuit := channelCircuitKey(n.ChannelID)
	adm, until, err := s.circuits.Admit(ctx, circuit, n.ID)
	if err != nil {
		return s.storeRetry(), true
	}
	if adm.Admission == retry.Wait {
		return s.waitForProbe(ctx, agent, id, until)
	}
	if s.opt.ClaimSends {
		held, err := s.claimSend(ctx, n)
		if err != nil {
			return s.storeRetry(), true
		}
		if !held {
			return 0, false // another process's attempt, which records its outcome
		}
	}
	c, err := s.channel(ctx, n.ChannelID)
	switch {
	case errs.Is(err, errs.NotFound):
		err = permanent(errors.New("channel deleted"))
	case err == nil && c.Incarnation != n.ChannelIncarnation:
		// Deleted and created again, maybe by someone else: the
		// notification stays dead with the incarnation it was made for.
		err = permanent(errors.New("channel deleted"))
	case err == nil && !c.Serves(agent, n.ByOperator):
		// The operator stopped sharing it since.
		err = permanent(errors.New("the channel no longer serves this agent (no longer shared)"))
	case err == nil:
		n.ChannelType = c.Type
		actx, cancel := context.WithTimeout(ctx, s.opt.AttemptTimeout)
		err = s.send(actx, c, n)
		cancel()
	}
	var f retry.Failure
	if err != nil {
		f = classify(err)
		if cerr := s.circuits.Failed(ctx, circuit, "channel:"+n.ChannelID, adm, f); cerr != nil {
			s.log.Error("recording the channel's circuit failed", "channel", n.ChannelID, "err", cerr)
		}
	} else if cerr := s.circuits.Succeeded(ctx, circuit, adm); cerr != nil {
		s.log.Error("closing the channel's circuit failed", "channel", n.ChannelID, "err", cerr)
	}
	now := s.opt.Now()
	var outcome string
	var after time.Duration
	again := false
	found, uerr := s.updatePending(ctx, agent, id, func(cur *alert.Notification) *alert.Notification {
		cur.ChannelType = n.ChannelType
		if err == nil {
			cur.Delivered(now)
			outcome = "delivered"
			// A repeating lapse's next notification waits its turn.
			rep, _ := cur.NextRepeat(now)
			return rep
		}
		cur.Failed(now, describe(err), f, s.policy)
		outcome, after, again = "failed", cur.Wait(now), !cur.Dead
		if cur.Dead {
			outcome = "dead"
		}
		return nil
	})
	if !found {
		outcome = ""
	}
	if uerr != nil {
		if err == nil {
			s.log.Error("notification sent but not recorded; the retry sends the same webhook-id", "agent", agent, "notification", id, "err", uerr)
		}
		return s.storeRetry(), true
	}
	if outcome == "" {
		return 0, false
	}
	typ := string(n.ChannelType)
	if typ == "" {
		typ = "unknown"
	}
	s.opt.Metrics.Record(metrics.Notifications, 1, typ, outcome)
	switch outcome {
	case "delivered":
		if at := n.Event.Time(); !at.IsZero() {
			s.opt.Metrics.Record(metrics.NotificationLatency, max(0, now.Sub(at).Seconds()), typ)
		}
		s.log.Info("notification delivered", "agent", agent, "notification", id, "channel", n.ChannelID, "event", n.Event.Type)
	case "dead":
		s.log.Warn("notification dead-lettered", "agent", agent, "notification", id, "channel", n.ChannelID, "class", f.Class, "err", describe(err), "cause", causeOf(err))
	default:
		s.log.Info("notification failed; will retry", "agent", agent, "notification", id, "channel", n.ChannelID, "class", f.Class, "next", after, "err", describe(err), "cause", causeOf(err))
	}
	return after, again
}

// skip records that notification id is not sent, and why: its condition
// no longer holds, or silence (its id) holds it back.
func (s *Service) skip(ctx context.Context, agent, id, typ, why, silence string) (time.Duration, bool) {
	now := s.opt.Now()
	_, err := s.updatePending(ctx, agent, id, func(cur *alert.Notification) *alert.Notification {
		cur.Skip(now, why)
		cur.Silenced = silence
		if silence == "" {
			return nil
		}
		// Held back by a silence, a repeating lapse still repeats (its
		// condition is checked again then).
		rep, _ := cur.NextRepeat(now)
		return rep
	})
	if err != nil {
		return s.storeRetry(), true
	}
	outcome := "skipped"
	if silence != "" {
		outcome = "silenced"
	}
	s.opt.Metrics.Record(metrics.Notifications, 1, typ, outcome)
	s.log.Info("notification skipped", "agent", agent, "notification", id, "why", why)
	return 0, false
}

// updatePending changes notification id of agent with change, in one
// conditional read-modify-write, if it still waits for delivery; change
// may return another notification to store in the same commit (a lapse's
// next repeat). It reports whether it found the notification pending (on
// the attempt that committed). Errors are the store's.
func (s *Service) updatePending(ctx context.Context, agent, id string, change func(cur *alert.Notification) *alert.Notification) (bool, error) {
	found := false
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		found = false
		it, ok, err := tx.Get(ctx, notificationKey(agent, id))
		if err != nil || !ok {
			return err
		}
		cur, err := decodeNotification(it)
		if err != nil || !cur.Pending() {
			return err
		}
		found = true
		for _, n := range []*alert.Notification{cur, change(cur)} {
			if n == nil {
				continue
			}
			item, err := notificationItem(n, s.opt.Retain)
			if err != nil {
				return err
			}
			tx.Put(item)
		}
		return nil
	})
	return found, err
}

// probeMargin is what a channel circuit's probe holds beyond the
// attempt's timeout: the time to record its outcome.
const probeMargin = 2 * time.Second

// storeRetry is how soon an attempt whose store read or write failed is
// tried again.
func (s *Service) storeRetry() time.Duration { return s.policy.Base }

// waitForProbe records that notification id waits for its channel's
// circuit until until (alert.Notification.WaitForProbe) and says when to
// come back.
func (s *Service) waitForProbe(ctx context.Context, agent, id string, until time.Time) (time.Duration, bool) {
	now := s.opt.Now()
	var after time.Duration
	again, dead := false, false
	found, err := s.updatePending(ctx, agent, id, func(cur *alert.Notification) *alert.Notification {
		cur.WaitForProbe(now, until, s.policy)
		dead, again, after = cur.Dead, !cur.Dead, cur.Wait(now)
		return nil
	})
	if !found {
		again, dead = false, false
	}
	if err != nil {
		return s.storeRetry(), true
	}
	if dead {
		s.opt.Metrics.Record(metrics.Notifications, 1, "unknown", "dead")
		s.log.Warn("notification dead-lettered: its channel's receiver stayed down", "agent", agent, "notification", id)
	}
	return after, again
}

// classify is the class of a failed send: whether a retry can mend it and
// how long the receiver asked to wait.
func classify(err error) retry.Failure {
	var p permanentError
	permanent := errors.As(err, &p)
	var h httpStatusError
	var ne net.Error
	var dnsErr *net.DNSError
	var op *net.OpError
	var me mailError
	f := retry.Failure{Permanent: permanent, Class: retry.Unknown}
	switch {
	case errors.Is(err, netguard.ErrRefused):
		f.Class = retry.Refused
	case errors.As(err, &h):
		f.RetryAfter = h.RetryAfter
		switch {
		case h.Status == http.StatusTooManyRequests:
			f.Class = retry.Throttled
		case h.Status == http.StatusUnauthorized || h.Status == http.StatusForbidden:
			f.Class = retry.Unauthorized
		case h.Status >= 500 || h.Status == http.StatusRequestTimeout || h.Status == http.StatusTooEarly || h.Status == http.StatusConflict:
			f.Class = retry.ServerError
		default:
			f.Class = retry.Rejected
		}
	case errors.As(err, &me):
		f.Class = retry.Unreachable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		f.Class = retry.Timeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, &dnsErr), errors.As(err, &op):
		f.Class = retry.Unreachable
	case permanent:
		f.Class = retry.Misconfigured
	}
	return f
}

// describe is what a notification keeps of a failed send: never a secret
// (URLs are not included: a Slack URL is one).
func describe(err error) string {
	var me mailError
	if errors.As(err, &me) {
		return me.Error()
	}
	var h httpStatusError
	if errors.As(err, &h) {
		return h.Error()
	}
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return "the destination's address is refused (loopback, private or special-purpose; see -allow-private-agents)"
	case errors.Is(err, context.DeadlineExceeded):
		return "the receiver did not answer in time"
	}
	var p permanentError
	if errors.As(err, &p) && !strings.Contains(p.Error(), "://") {
		return p.Error()
	}
	msg := err.Error()
	if i := strings.Index(msg, "://"); i >= 0 {
		// net/http errors name the URL: keep only the class of failure.
		if j := strings.LastIndex(msg, ": "); j > i {
			return "could not reach the receiver: " + msg[j+2:]
		}
		return "could not reach the receiver"
	}
	return msg
}

// mailError is a failed e-mail send. What a tenant may read of it says
// no more than that (the operator's mail server, its address and its
// answers are the operator's): the logs keep the cause.
type mailError struct{ err error }

func (e mailError) Error() string {
	return "the mail server refused the message or could not be reached"
}
func (e mailError) Unwrap() error { return e.err }

// httpStatusError is an answer that is not a success.
type httpStatusError struct {
	Status int
	// RetryAfter is what the receiver's Retry-After asked for (or zero).
	RetryAfter time.Duration
}

func (e httpStatusError) Error() string {
	if e.Status >= 300 && e.Status < 400 {
		return fmt.Sprintf("the receiver answered %d (a redirect, not followed)", e.Status)
	}
	return fmt.Sprintf("the receiver answered %d", e.Status)
}

// send sends n to channel c once.
func (s *Service) send(ctx context.Context, c storedChannel, n *alert.Notification) error {
	sec, err := s.secret(ctx, c)
	if err != nil {
		return err
	}
	link := alert.ConsoleLink(s.opt.PublicURL, n)
	switch c.Type {
	case alert.Webhook:
		body, err := alert.WebhookBody(n)
		if err != nil {
			return permanent(err)
		}
		wh, err := standardwebhooks.NewWebhook(sec.WebhookSecret)
		if err != nil {
			return permanent(errors.New("the webhook secret is malformed"))
		}
		now := s.opt.Now()
		sig, err := wh.Sign(n.ID, now, body)
		if err != nil {
			return permanent(err)
		}
		return s.post(ctx, c.URL, body, map[string]string{
			"webhook-id": n.ID, "webhook-timestamp": strconv.FormatInt(now.Unix(), 10), "webhook-signature": sig,
		})
	case alert.Slack:
		body, err := alert.SlackBody(n, link)
		if err != nil {
			return permanent(err)
		}
		return s.post(ctx, sec.SlackURL, body, nil)
	case alert.PagerDuty:
		body, err := alert.PagerDutyBody(n, sec.RoutingKey, link)
		if err != nil {
			return permanent(err)
		}
		return s.post(ctx, c.URL, body, nil)
	case alert.Email:
		if s.mail == nil {
			return permanent(errors.New("this server has no mail sender"))
		}
		if err := s.mail.SendMail(ctx, c.To, alert.MailOf(n, link)); err != nil {
			return mailError{err}
		}
		return nil
	case alert.OTLP:
		body, err := alert.OTLPLogsBody(n, s.opt.Now())
		if err != nil {
			return permanent(err)
		}
		return s.post(ctx, c.URL, body, sec.Headers)
	case alert.EventBridge:
		if s.events == nil {
			return permanent(errors.New("this server cannot put EventBridge events"))
		}
		body, err := alert.WebhookBody(n)
		if err != nil {
			return permanent(err)
		}
		at := n.Event.Time()
		if at.IsZero() {
			at = s.opt.Now()
		}
		return s.events.PutEvent(ctx, c.EventBusName, string(n.Event.Type), body, at)
	}
	return permanent(fmt.Errorf("unknown channel type %q", c.Type))
}

// post sends body as JSON to url with headers. A 2xx answer is success;
// a 4xx answer is permanent (the receiver refuses this request) except 408,
// 409, 425 and 429; anything else (5xx, 3xx, no answer) is retried.
func (s *Service) post(ctx context.Context, url string, body []byte, headers map[string]string) error {
	if s.http == nil {
		return permanent(errors.New("this server sends no HTTP notifications"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return permanent(errors.New("the channel's URL is not valid"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "clockwork-notifications")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrRefused) {
			return permanent(err)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusConflict ||
		resp.StatusCode == http.StatusTooEarly || resp.StatusCode == http.StatusTooManyRequests:
		return httpStatusError{Status: resp.StatusCode, RetryAfter: retry.ParseRetryAfter(resp.Header.Get("Retry-After"), s.opt.Now())}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return permanent(httpStatusError{Status: resp.StatusCode})
	}
	return httpStatusError{Status: resp.StatusCode, RetryAfter: retry.ParseRetryAfter(resp.Header.Get("Retry-After"), s.opt.Now())}
}

// secretTTL bounds how long an opened channel secret stays in memory (a
// KMS Decrypt per attempt would cost more than the rest of a notification
// on AWS). A PUT of the channel is seen at once: the cache is keyed by the
// sealed value.
const secretTTL = 5 * time.Minute

type cachedSecret struct {
	sealed string
	at     time.Time
	sec    alert.Secret
}

// secret opens c's sealed secret, or answers it from the cache.
func (s *Service) secret(ctx context.Context, c storedChannel) (alert.Secret, error) {
	var sec alert.Secret
	if len(c.Sealed) == 0 {
		return sec, nil
	}
	now := time.Now()
	s.mu.Lock()
	if e, ok := s.secrets[c.ID]; ok && e.sealed == string(c.Sealed) && now.Sub(e.at) < secretTTL {
		s.mu.Unlock()
		return e.sec, nil
	}
	s.mu.Unlock()
	if s.sealer == nil {
		return sec, errors.New("this process holds no key to open channel secrets")
	}
	plain, err := s.sealer.Open(ctx, c.Sealed, sealAgent, c.ID)
	if err != nil {
		return sec, errors.New("the channel's secret could not be opened")
	}
	err = json.Unmarshal(plain, &sec)
	clear(plain)
	if err != nil {
		return sec, permanent(errors.New("the channel's secret is malformed"))
	}
	s.mu.Lock()
	if len(s.secrets) > 10000 {
		clear(s.secrets)
	}
	s.secrets[c.ID] = cachedSecret{sealed: string(c.Sealed), at: now, sec: sec}
	s.mu.Unlock()
	return sec, nil
}

// causeOf is what the logs keep of a failed send beyond describe: the
// mail sender's own error (never a channel secret: mail carries none).
func causeOf(err error) string {
	var me mailError
	if errors.As(err, &me) {
		return me.err.Error()
	}
	return ""
}
