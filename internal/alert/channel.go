package alert

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
)

// Type is a channel's kind.
type Type string

// The channel types.
const (
	Webhook     Type = "webhook"
	Slack       Type = "slack"
	PagerDuty   Type = "pagerduty"
	Email       Type = "email"
	EventBridge Type = "eventbridge"
	// OTLP sends VERIFYs' scores to an OpenTelemetry collector (or any
	// OTLP/HTTP logs receiver: Langfuse, Phoenix, Datadog) as
	// gen_ai.evaluation.result events (OTLPLogsBody).
	OTLP Type = "otlp"
)

// Types lists every channel type.
var Types = []Type{Webhook, Slack, PagerDuty, Email, EventBridge, OTLP}

// typeList is Types for messages.
const typeList = "webhook, slack, pagerduty, email, eventbridge, otlp"

// Bounds on an otlp channel's headers (its receiver's credentials, such
// as Authorization or an API key: kept sealed with the channel's secret).
const (
	MaxHeaders        = 10
	MaxHeaderValueLen = 1024
)

var headerNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

// reservedHeaders are set by the sender.
var reservedHeaders = []string{"content-type", "content-length", "host", "user-agent", "connection", "transfer-encoding"}

// PagerDutyEventsURL is PagerDuty's Events API v2 enqueue endpoint, the
// default URL of a pagerduty channel.
const PagerDutyEventsURL = "https://events.pagerduty.com/v2/enqueue"

// Limits of a channel.
const (
	MaxChannelIDLen = 64
	MaxRecipients   = 10
	MaxURLLen       = 2048
)

// plainAddress is an e-mail address in dot-atom form: no quoted local part,
// comment, display name or whitespace, so nothing in it can be read as an
// SMTP command parameter or a header.
var plainAddress = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+/=?^_{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$`)

var channelIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// eventBusPattern is EventBridge's event bus name or ARN.
var eventBusPattern = regexp.MustCompile(`^(arn:aws[\w-]*:events:[a-z0-9-]+:\d{12}:event-bus/)?[/\.\-_A-Za-z0-9]{1,256}$`)

// Channel is a configured destination, without its secret. Owners are the
// agents of the principal that created it ("*" for an operator acting for
// every agent): who may see it, change it and attach rules to it.
type Channel struct {
	ID           string   `json:"channelId"`
	Type         Type     `json:"type"`
	URL          string   `json:"url,omitempty"` // webhook, pagerduty (Slack's URL is a secret)
	To           []string `json:"to,omitempty"`  // email
	EventBusName string   `json:"eventBusName,omitempty"`
	// Name is a display name (optional).
	Name   string   `json:"name,omitempty"`
	Owners []string `json:"owners,omitempty"`
	// Shared says that any principal acting for an agent may name the
	// channel in that agent's rules and see its id, type and name (never
	// its destination or secret). Only an operator's channel is shared;
	// nil (a channel stored before sharing existed) reads as shared when
	// an operator owns it (IsShared).
	Shared *bool `json:"shared,omitempty"`
	// Incarnation is set when the channel is created: a channel deleted
	// and created again under the same id is another incarnation, whose
	// owner sees none of the earlier one's notifications.
	Incarnation string `json:"incarnation,omitempty"`
	CreatedAt   string `json:"createdAt,omitempty"`
	UpdatedAt   string `json:"updatedAt,omitempty"`
}

// Secret is what a channel keeps sealed: the webhook signing secret, the
// Slack incoming-webhook URL, the PagerDuty routing key.
type Secret struct {
	WebhookSecret string `json:"webhookSecret,omitempty"`
	SlackURL      string `json:"slackUrl,omitempty"`
	RoutingKey    string `json:"routingKey,omitempty"`
	// Headers are an otlp channel's request headers.
	Headers map[string]string `json:"headers,omitempty"`
}

// Empty reports whether s holds nothing to seal.
func (s Secret) Empty() bool {
	return s.WebhookSecret == "" && s.SlackURL == "" && s.RoutingKey == "" && len(s.Headers) == 0
}

// channelBody is the PUT body.
type channelBody struct {
	Type         Type     `json:"type"`
	URL          string   `json:"url"`
	Secret       string   `json:"secret"`
	RoutingKey   string   `json:"routingKey"`
	To           []string `json:"to"`
	EventBusName string   `json:"eventBusName"`
	Name         string   `json:"name"`
	Shared       *bool    `json:"shared"`
	// Headers are an otlp channel's request headers (sealed).
	Headers map[string]string `json:"headers"`
}

// MaxNameLen bounds a channel's display name (characters).
const MaxNameLen = 100

// Capabilities say what this runtime can send and to where.
type Capabilities struct {
	// EventBridge: the runtime can call PutEvents (AWS only).
	EventBridge bool
	// Email: the runtime has a mail sender (SMTP or SES).
	Email bool
	// InsecureURLs accepts http:// destinations (loopback receivers, with
	// private destinations allowed); otherwise https is required.
	InsecureURLs bool
}

// ValidChannelID checks a channel id: letters, digits, '.', '_' and '-',
// at most 64, starting with a letter or digit.
func ValidChannelID(id string) string {
	if !channelIDPattern.MatchString(id) {
		return "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	return ""
}

// ParseChannel validates a PUT body for channel id and returns the channel
// (without owners and times) and its secret. A webhook without a secret
// gets a generated one, and generated is true (the answer returns it once).
// Errors: an Invalid error naming each failing field.
func ParseChannel(id string, body []byte, caps Capabilities) (Channel, Secret, bool, error) {
	var c errs.Collector
	if msg := ValidChannelID(id); msg != "" {
		c.Add("channelId", "%s", msg)
	}
	var b channelBody
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Channel{}, Secret{}, false, errs.Fields("the body is not a channel", []errs.FieldError{{Path: "body", Message: jsonMessage(err)}})
	}
	ch := Channel{ID: id, Type: b.Type, Name: b.Name, Shared: b.Shared}
	if utf8.RuneCountInString(b.Name) > MaxNameLen || strings.IndexFunc(b.Name, unicode.IsControl) >= 0 {
		c.Add("name", "must be at most %d characters, none of them a control character", MaxNameLen)
	}
	var sec Secret
	generated := false
	unexpected := func(field, value string) {
		if value != "" {
			c.Add(field, "is not a field of a %s channel", b.Type)
		}
	}
	if b.Headers != nil && b.Type != OTLP {
		c.Add("headers", "is not a field of a %s channel", b.Type)
	}
	switch b.Type {
	case Webhook:
		ch.URL = checkURL(&c, "url", b.URL, caps, true)
		unexpected("routingKey", b.RoutingKey)
		unexpected("eventBusName", b.EventBusName)
		switch {
		case b.Secret == "":
			sec.WebhookSecret, generated = NewWebhookSecret(), true
		default:
			if msg := checkWebhookSecret(b.Secret); msg != "" {
				c.Add("secret", "%s", msg)
			}
			sec.WebhookSecret = b.Secret
		}
	case Slack:
		sec.SlackURL = checkURL(&c, "url", b.URL, caps, true)
		unexpected("secret", b.Secret)
		unexpected("routingKey", b.RoutingKey)
		unexpected("eventBusName", b.EventBusName)
	case PagerDuty:
		ch.URL = PagerDutyEventsURL
		if b.URL != "" {
			ch.URL = checkURL(&c, "url", b.URL, caps, true)
		}
		switch {
		case b.RoutingKey == "":
			c.Add("routingKey", "is required")
		case len(b.RoutingKey) > 64 || strings.IndexFunc(b.RoutingKey, unicode.IsSpace) >= 0:
			c.Add("routingKey", "must be at most 64 characters without spaces")
		}
		sec.RoutingKey = b.RoutingKey
		unexpected("secret", b.Secret)
		unexpected("eventBusName", b.EventBusName)
	case Email:
		if !caps.Email {
			c.Add("type", "email needs a mail sender, which this server has none of (-smtp on the embedded default, the SES sender on AWS)")
		}
		switch {
		case len(b.To) == 0:
			c.Add("to", "is required: at least one address")
		case len(b.To) > MaxRecipients:
			c.Add("to", "has more than %d addresses", MaxRecipients)
		}
		for i, a := range b.To {
			switch {
			case !plainAddress.MatchString(a):
				c.Add("to["+strconv.Itoa(i)+"]", "is not a plain e-mail address (local@domain, without quotes, spaces or a display name)")
			case slices.Contains(ch.To, a):
				c.Add("to["+strconv.Itoa(i)+"]", "is listed twice")
			default:
				ch.To = append(ch.To, a)
			}
		}
		unexpected("url", b.URL)
		unexpected("secret", b.Secret)
		unexpected("routingKey", b.RoutingKey)
		unexpected("eventBusName", b.EventBusName)
	case EventBridge:
		if !caps.EventBridge {
			c.Add("type", "eventbridge channels exist on AWS only")
		}
		if !eventBusPattern.MatchString(b.EventBusName) {
			c.Add("eventBusName", "must be an event bus name or ARN")
		}
		ch.EventBusName = b.EventBusName
		unexpected("url", b.URL)
		unexpected("secret", b.Secret)
		unexpected("routingKey", b.RoutingKey)
	case OTLP:
		ch.URL = checkURL(&c, "url", b.URL, caps, true)
		unexpected("secret", b.Secret)
		unexpected("routingKey", b.RoutingKey)
		unexpected("eventBusName", b.EventBusName)
		if len(b.Headers) > MaxHeaders {
			c.Add("headers", "has more than %d headers", MaxHeaders)
		}
		names := make([]string, 0, len(b.Headers))
		for k := range b.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			v := b.Headers[k]
			switch {
			case !headerNamePattern.MatchString(k):
				c.Add("headers."+k, "is not a header name (letters, digits and '-', at most 64)")
			case slices.Contains(reservedHeaders, strings.ToLower(k)):
				c.Add("headers."+k, "is set by the sender")
			case v == "" || len(v) > MaxHeaderValueLen || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
				c.Add("headers."+k, "must be 1 to %d bytes without control characters", MaxHeaderValueLen)
			}
		}
		if len(b.Headers) > 0 {
			sec.Headers = b.Headers
		}
	case "":
		c.Add("type", "is required: one of "+typeList)
	default:
		c.Add("type", "must be one of "+typeList)
	}
	if len(c.List) > 0 {
		return Channel{}, Secret{}, false, c.Err("the channel is not valid")
	}
	return ch, sec, generated, nil
}

func checkURL(c *errs.Collector, field, raw string, caps Capabilities, required bool) string {
	if raw == "" {
		if required {
			c.Add(field, "is required")
		}
		return ""
	}
	if len(raw) > MaxURLLen {
		c.Add(field, "is longer than %d bytes", MaxURLLen)
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		c.Add(field, "must be an absolute URL without user info or fragment")
		return ""
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && caps.InsecureURLs:
	default:
		c.Add(field, "must be an https URL")
		return ""
	}
	return u.String()
}

// WebhookSecretPrefix starts every Standard Webhooks secret.
const WebhookSecretPrefix = "whsec_"

// NewWebhookSecret returns a fresh signing secret: whsec_ and the base64 of
// 32 random bytes.
func NewWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// checkWebhookSecret checks a Standard Webhooks secret: whsec_ and the
// base64 of 24 to 64 bytes.
func checkWebhookSecret(s string) string {
	key, ok := strings.CutPrefix(s, WebhookSecretPrefix)
	if !ok {
		return "must start with whsec_ (the Standard Webhooks secret format)"
	}
	b, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(b) < 24 || len(b) > 64 {
		return "must be whsec_ and the base64 of 24 to 64 random bytes"
	}
	return ""
}

// VisibleTo reports whether a principal acting for agents may see and use
// ch: an operator acting for every agent sees all; another principal sees
// the channels one of whose owners it acts for, never an operator's.
func (ch *Channel) VisibleTo(agents []string) bool {
	if slices.Contains(agents, "*") {
		return true
	}
	for _, o := range ch.Owners {
		if o != "*" && slices.Contains(agents, o) {
			return true
		}
	}
	return false
}

// IsShared reports whether ch is shared: an operator's channel unless the
// operator said otherwise.
func (ch *Channel) IsShared() bool {
	if ch.Shared != nil {
		return *ch.Shared
	}
	return slices.Contains(ch.Owners, "*")
}

// UsableBy reports whether a principal acting for agents may name ch in
// the rules of an agent it acts for (which Serves must also allow): it
// sees ch, or ch is shared.
func (ch *Channel) UsableBy(agents []string) bool {
	return ch.VisibleTo(agents) || len(agents) > 0 && ch.IsShared()
}

// Redacted is what a principal that may use a shared channel but does not
// own it sees: its id, type and name.
func (ch *Channel) Redacted() Channel {
	shared := true
	return Channel{ID: ch.ID, Type: ch.Type, Name: ch.Name, Shared: &shared}
}

// WithSharing returns ch with Shared set to what IsShared says, as
// answers show it.
func (ch Channel) WithSharing() Channel {
	shared := ch.IsShared()
	ch.Shared = &shared
	return ch
}

// ManageableBy reports whether a principal acting for agents may replace
// or delete ch: it acts for every owner.
func (ch *Channel) ManageableBy(agents []string) bool {
	if slices.Contains(agents, "*") {
		return true
	}
	for _, o := range ch.Owners {
		if o == "*" || !slices.Contains(agents, o) {
			return false
		}
	}
	return true
}

// SameOwners reports whether a principal acting for agents would own ch
// had it created it.
func (ch *Channel) SameOwners(agents []string) bool {
	a, b := slices.Clone(ch.Owners), slices.Clone(agents)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Serves reports whether a rule of agent may send to ch: the agent is an
// owner, or the channel is an operator's and shared, or its rules were
// written by an operator (byOperator). Checked when a notification is made
// and when it is sent, so a channel the operator stopped sharing (or
// deleted and made again, private) no longer serves rules a tenant wrote.
func (ch *Channel) Serves(agent string, byOperator bool) bool {
	if slices.Contains(ch.Owners, agent) {
		return true
	}
	return slices.Contains(ch.Owners, "*") && (byOperator || ch.IsShared())
}

func jsonMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return msg
}
