package awsrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/awsclient/awsjson"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/notify"
)

// The alert senders of the AWS runtime, written on awsjson (the SDK's SES
// and EventBridge clients would put the bootstraps over their budget).

// sesMailer sends e-mail channels with Amazon SES (v2 SendEmail) from the
// sender the deployment configured (SES_FROM, a verified identity).
type sesMailer struct {
	cfg  aws.Config
	from string
}

func endpointOf(cfg aws.Config, service string) string {
	if e := aws.ToString(cfg.BaseEndpoint); e != "" {
		return e
	}
	return fmt.Sprintf("https://%s.%s.amazonaws.com", service, cfg.Region)
}

// SendMail implements notify.MailSender.
func (m sesMailer) SendMail(ctx context.Context, to []string, msg alert.Mail) error {
	in := map[string]any{
		"FromEmailAddress": m.from,
		"Destination":      map[string]any{"ToAddresses": to},
		"Content": map[string]any{"Simple": map[string]any{
			"Subject": map[string]string{"Data": msg.Subject, "Charset": "UTF-8"},
			"Body":    map[string]any{"Text": map[string]string{"Data": msg.Text, "Charset": "UTF-8"}},
		}},
	}
	var out struct{ MessageId string }
	return awsjson.Do(ctx, m.cfg, awsjson.Call{Service: "ses", Endpoint: endpointOf(m.cfg, "email"),
		ContentType: "application/json", Path: "/v2/email/outbound-emails"}, in, &out)
}

// eventPutter puts eventbridge channels' events (PutEvents, Source
// clockwork, DetailType the event type).
type eventPutter struct{ cfg aws.Config }

// PutEvent implements notify.EventPutter. An entry EventBridge refuses is
// an error naming its code.
func (p eventPutter) PutEvent(ctx context.Context, bus, detailType string, detail []byte, at time.Time) error {
	in := map[string]any{"Entries": []map[string]any{{
		"Source": alert.EventBridgeSource, "DetailType": detailType, "Detail": string(detail),
		"EventBusName": bus, "Time": at.Unix(),
	}}}
	var out struct {
		FailedEntryCount int
		Entries          []struct{ EventId, ErrorCode, ErrorMessage string }
	}
	err := awsjson.Do(ctx, p.cfg, awsjson.Call{Service: "events", Endpoint: endpointOf(p.cfg, "events"),
		ContentType: "application/x-amz-json-1.1", Target: "AWSEvents.PutEvents"}, in, &out)
	if err != nil {
		return err
	}
	if out.FailedEntryCount > 0 {
		code := "unknown"
		if len(out.Entries) > 0 {
			code = out.Entries[0].ErrorCode + ": " + out.Entries[0].ErrorMessage
		}
		return errors.New("EventBridge refused the event: " + code)
	}
	return nil
}

// newNotify assembles the alerting service of every function: channel
// secrets sealed with the credentials key, webhooks through the outbound
// guard, e-mail with SES when SES_FROM is set, EventBridge when
// EVENTBRIDGE_ALERTS is.
func newNotify(r *Runtime, sealer credentials.Sealer) *notify.Service {
	cfg := r.Config
	client := cfg.AgentHTTPClient
	if client == nil {
		client = netguard.NewHTTPClient(netguard.Guard{AllowPrivate: cfg.AllowPrivateAgents}, 15*time.Second)
	}
	var mail notify.MailSender
	if cfg.SESFrom != "" {
		mail = sesMailer{cfg: r.AWS, from: cfg.SESFrom}
	}
	var events notify.EventPutter
	if cfg.EventBridgeAlerts {
		events = eventPutter{cfg: r.AWS}
	}
	opt := cfg.Notify
	opt.PublicURL = cfg.PublicURL
	opt.InsecureURLs = opt.InsecureURLs || cfg.AllowPrivateAgents
	opt.Metrics = cfg.Metrics
	opt.Retain = cfg.RetainExpectations
	if opt.RetryFor == 0 {
		opt.RetryFor = cfg.DeliveryRetryFor
	}
	if opt.MaxAttempts == 0 {
		opt.MaxAttempts = cfg.DeliveryAttempts
	}
	if opt.MaxBackoff == 0 {
		opt.MaxBackoff = cfg.DeliveryMaxWait
	}
	// Function instances apart may attempt one notification at once.
	opt.ClaimSends = true
	if r.Watcher != nil {
		opt.Expectation = r.Watcher.Get
	}
	if cfg.Now != nil {
		opt.Now = cfg.Now
	}
	return notify.New(r.Store, sealer, client, mail, events, opt, cfg.Log)
}

// notifyChainLimit is the longest wait a notification rides the timer
// queue for (chained 15-minute message timers, about $1.5 per million
// hops); beyond it one EventBridge Scheduler entry ($1 per million) is
// cheaper.
const notifyChainLimit = time.Hour

// notifyQueue is the AWS runtime's notify.Enqueuer: each attempt is a
// message on the timer queue (delayed to its time; the clock function
// runs it), so a slow receiver never holds a stream shard.
type notifyQueue struct{ r *Runtime }

// EnqueueNotification implements notify.Enqueuer.
func (q notifyQueue) EnqueueNotification(ctx context.Context, agent, id string, at time.Time) error {
	in := expect.Instant{AgentID: agent, ExpectationID: id, Kind: expect.InstantNotify, At: at}
	// A retry's wait (at most an hour) rides the timer queue; a reminder
	// or escalation further off gets one schedule rather than a chain of
	// 15-minute messages (Schedule puts what is near on the queue too).
	if q.r.Clock.HasQueue() && at.Sub(q.r.Watcher.Now()) <= notifyChainLimit {
		return q.r.Clock.Rearm(ctx, in)
	}
	return q.r.Clock.Schedule(ctx, []expect.Instant{in})
}
