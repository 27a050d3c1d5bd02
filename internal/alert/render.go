package alert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// DedupKey is PagerDuty's dedup_key for events about one expectation of one
// agent (one incident per expectation and lapse: an expectation lapses at
// most once), and for a VERIFY, per verification.
func DedupKey(agent, about string) string {
	h := sha256.Sum256([]byte(agent + "\x00" + about))
	return "clockwork-" + hex.EncodeToString(h[:12])
}

// Summary is a one-line human reading of n's event.
func Summary(n *Notification) string {
	a := n.About
	held := ""
	if n.Event.Data.HeldBack > 0 {
		held = fmt.Sprintf(" (%d more held back by the rule's cooldown)", n.Event.Data.HeldBack)
	}
	switch n.Event.Type {
	case Lapsed:
		again := ""
		switch d := n.Event.Data; {
		case d.Escalation > 0:
			again = fmt.Sprintf("Escalated (step %d, nobody acknowledged): ", d.Escalation)
		case d.Repeat > 0:
			again = fmt.Sprintf("Still unacknowledged (repeat %d): ", d.Repeat)
		}
		return fmt.Sprintf("%sExpectation %s (%s) on %s %s lapsed: %s, due %s%s", again, a.ExpectationID, a.Kind, a.SubjectType, a.SubjectID, a.Lapse, a.DueAt, held)
	case DueSoon:
		return fmt.Sprintf("Expectation %s (%s) on %s %s is due at %s: %s%s", a.ExpectationID, a.Kind, a.SubjectType, a.SubjectID, a.DueAt, a.Expects, held)
	case Acknowledged:
		note := ""
		if d := n.Event.Data; d.Note != "" {
			note = ": " + d.Note
		}
		return fmt.Sprintf("Lapse of expectation %s (%s) on %s %s acknowledged by %s%s%s", a.ExpectationID, a.Kind, a.SubjectType, a.SubjectID, n.Event.Data.AcknowledgedBy, note, held)
	case Recovered:
		return fmt.Sprintf("Expectation %s (%s) on %s %s recovered: a fact satisfied it after it lapsed (%s)%s", a.ExpectationID, a.Kind, a.SubjectType, a.SubjectID, a.Lapse, held)
	case DeliveryDead:
		return fmt.Sprintf("The lapse task of expectation %s (%s) on %s %s could not be delivered to agent %s: %s%s", a.ExpectationID, a.Kind, a.SubjectType, a.SubjectID, n.AgentID, n.Event.Data.Reason, held)
	case VerificationCompleted:
		return fmt.Sprintf("VERIFY of plan %s for agent %s (anticipation %s): %s%s", n.Event.Data.PlanID, n.AgentID, n.Event.Data.AnticipationID, n.Event.Data.Verdict, held)
	case VerificationFailed:
		return fmt.Sprintf("VERIFY of plan %s failed for agent %s (anticipation %s); failed criteria: %s%s", n.Event.Data.PlanID, n.AgentID, n.Event.Data.AnticipationID, strings.Join(n.Event.Data.FailedCriteria, ", "), held)
	case PassRateBelow, PassRateRecovered:
		d := n.Event.Data
		of := "VERIFYs"
		if d.CriterionID != "" {
			of = "grades of criterion " + d.CriterionID
		}
		rate := 0.0
		if d.PassRate != nil {
			rate = *d.PassRate
		}
		if n.Event.Type == PassRateBelow {
			return fmt.Sprintf("Pass rate of agent %s's %s fell to %.1f%% over %s (%d plans), under %.1f%%%s", n.AgentID, of, rate*100, d.Window, d.Plans, d.Threshold*100, held)
		}
		return fmt.Sprintf("Pass rate of agent %s's %s is back to %.1f%% over %s (%d plans), at or over %.1f%%%s", n.AgentID, of, rate*100, d.Window, d.Plans, d.Threshold*100, held)
	case ChannelTest:
		return fmt.Sprintf("clockwork test notification for channel %s", n.ChannelID)
	}
	return string(n.Event.Type)
}

// Details are the lines of a readable notification (Slack, e-mail):
// what was expected, of which subject, when it was due, the lapse.
func Details(n *Notification) []string {
	a := n.About
	var out []string
	if a.ExpectationID != "" {
		out = append(out, "Agent: "+n.AgentID, "Expectation: "+a.ExpectationID+" ("+a.Kind+")",
			"Subject: "+a.SubjectType+" "+a.SubjectID, "Expected: "+a.Expects, "Due: "+a.DueAt)
		if a.Lapse != "" {
			out = append(out, "Lapse: "+a.Lapse)
		}
	}
	if n.Event.Data.Reason != "" {
		out = append(out, "Reason: "+n.Event.Data.Reason)
	}
	if n.Event.Data.PlanID != "" {
		out = append(out, "Agent: "+n.AgentID, "Plan: "+n.Event.Data.PlanID, "Anticipation: "+n.Event.Data.AnticipationID)
	}
	if d := n.Event.Data; d.PassRate != nil {
		out = append(out, "Agent: "+n.AgentID, fmt.Sprintf("Pass rate: %.1f%% of %d plans over %s", *d.PassRate*100, d.Plans, d.Window),
			fmt.Sprintf("Threshold: %.1f%%", d.Threshold*100))
		if d.CriterionID != "" {
			out = append(out, "Criterion: "+d.CriterionID)
		}
	}
	return out
}

// ConsoleLink is the console page of n's record on a server whose public
// URL is base ("" when it is not known).
func ConsoleLink(base string, n *Notification) string {
	if base == "" {
		return ""
	}
	base = strings.TrimRight(base, "/")
	switch {
	case n.About.ExpectationID != "":
		return base + "/console#/agents/" + url.PathEscape(n.AgentID) + "/expectations/" + url.PathEscape(n.About.ExpectationID)
	case n.Event.Data.AnticipationID != "":
		return base + "/console#/anticipations/" + url.PathEscape(n.Event.Data.AnticipationID)
	}
	return ""
}

// SlackBody is the body of a Slack incoming webhook: text (the fallback
// and the notification's text) and blocks.
func SlackBody(n *Notification, link string) ([]byte, error) {
	text := Summary(n)
	fields := []map[string]string{}
	for _, d := range Details(n) {
		fields = append(fields, map[string]string{"type": "mrkdwn", "text": slackEscape(d)})
	}
	blocks := []any{
		map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": "*" + slackEscape(text) + "*"}},
	}
	if len(fields) > 0 {
		blocks = append(blocks, map[string]any{"type": "section", "fields": fields[:min(len(fields), 10)]})
	}
	if link != "" {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []map[string]string{{"type": "mrkdwn", "text": "<" + link + "|Open in the clockwork console>"}}})
	}
	return json.Marshal(map[string]any{"text": slackEscape(text), "blocks": blocks})
}

// slackEscape escapes what Slack's mrkdwn treats as control characters.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// PagerDutyBody is an Events API v2 event: a trigger for a lapse, a dead
// delivery or a failed VERIFY, an acknowledge for an acknowledged lapse, a
// resolve for a recovery, with n's dedup key (the lapse's incident).
func PagerDutyBody(n *Notification, routingKey, link string) ([]byte, error) {
	action := "trigger"
	severity := "error"
	switch n.Event.Type {
	case Recovered, PassRateRecovered:
		action = "resolve"
	case Acknowledged:
		action = "acknowledge"
	case Lapsed:
		severity = "warning"
	case DueSoon:
		severity = "info"
	case ChannelTest:
		severity = "info"
	}
	ev := map[string]any{
		"routing_key":  routingKey,
		"event_action": action,
		"dedup_key":    n.DedupKey,
		"payload": map[string]any{
			"summary":        truncate(Summary(n), 1024),
			"source":         "clockwork/" + n.AgentID,
			"severity":       severity,
			"timestamp":      n.Event.Timestamp,
			"component":      n.About.Kind,
			"class":          string(n.Event.Type),
			"custom_details": n.Event,
		},
		"client": "clockwork",
	}
	if link != "" {
		ev["client_url"] = link
	}
	return json.Marshal(ev)
}

// Mail is an e-mail notification's content.
type Mail struct {
	Subject string
	Text    string
}

// MailOf renders n as a plain-text e-mail.
func MailOf(n *Notification, link string) Mail {
	var b strings.Builder
	b.WriteString(Summary(n))
	b.WriteString("\n\n")
	for _, d := range Details(n) {
		b.WriteString(d)
		b.WriteString("\n")
	}
	if link != "" {
		b.WriteString("\n" + link + "\n")
	}
	b.WriteString("\nSent by clockwork (" + string(n.Event.Type) + ", notification " + n.ID + ").\n")
	subject := "[clockwork] " + truncate(Summary(n), 180)
	return Mail{Subject: strings.NewReplacer("\r", " ", "\n", " ").Replace(subject), Text: b.String()}
}

// EventBridgeSource is the Source of every event clockwork puts on a bus.
const EventBridgeSource = "clockwork"

// WebhookBody is the body of a webhook notification and EventBridge's
// Detail: the event as stored.
func WebhookBody(n *Notification) ([]byte, error) { return json.Marshal(n.Event) }

// Time parses an event's timestamp (zero when it does not parse).
func (e Event) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	return t
}
