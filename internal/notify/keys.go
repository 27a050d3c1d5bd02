package notify

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// The items of alerting, in the watcher's table (prefixes of their own):
//
//	item          PK                 SK                  index PK / SK
//	channel       CHANNEL#<id>       CHANNEL             gsi5: CHANNELS / <id> (listing)
//	circuit       CHANNEL#<id>       CIRCUIT             (package breaker; while its receiver fails; expires)
//	rules         A#<agent>          ALERTS
//	cooldown      A#<agent>          ALERTCD#<rule id>
//	send claim    A#<agent>          NC#<notification id>#<replays>.<attempts>   (store.Claim; expires)
//	notification  A#<agent>          N#<notification id> gsi5: NOTIFY#<shard> / <next attempt>#<agent>#<id> while pending,
//	                                                     NDEAD#<channel>#<incarnation> / <dead at>#<agent>#<id> when dead-lettered;
//	                                                     gsi2: NE#<agent>#<expectation or plan> / <created>#<id> (timeline)
//
// A notification is its own outbox entry, like a lapse record: created
// (once, by its deterministic id) when the change that caused it is
// processed, and indexed while it waits, so a sweep finds any whose
// attempt was lost.
const (
	TypeChannel      = "channel"
	TypeRules        = "alertrules"
	TypeCooldown     = "alertcooldown"
	TypeNotification = "notification"
	TypeSilence      = "silence"

	// NotifyShards spreads pending notifications over gsi5 partitions.
	NotifyShards = 16
	// channelsPK is the gsi5 partition listing channels.
	channelsPK = "CHANNELS"
)

func esc(s string) string { return store.KeyPart(s) }

func channelKey(id string) store.Key { return store.Key{PK: "CHANNEL#" + esc(id), SK: "CHANNEL"} }

// channelCircuitKey is the key of the circuit of a channel's receiver
// (package breaker): there while notifications to it are failing.
func channelCircuitKey(id string) store.Key {
	return store.Key{PK: "CHANNEL#" + esc(id), SK: "CIRCUIT"}
}

// silencesPK is the partition of every silence (one, read consistently
// and whole: there are at most alert.MaxSilences).
const silencesPK = "SILENCES"

func silenceKey(id string) store.Key { return store.Key{PK: silencesPK, SK: esc(id)} }

func rulesKey(agent string) store.Key { return store.Key{PK: "A#" + esc(agent), SK: "ALERTS"} }

func cooldownKey(agent, rule string) store.Key {
	return store.Key{PK: "A#" + esc(agent), SK: "ALERTCD#" + esc(rule)}
}

func notificationKey(agent, id string) store.Key {
	return store.Key{PK: "A#" + esc(agent), SK: "N#" + esc(id)}
}

// sendClaimKey is the key of the claim on one attempt at a notification
// (Options.ClaimSends), named by the replays and attempts before it.
func sendClaimKey(n *alert.Notification) store.Key {
	return store.Key{PK: "A#" + esc(n.AgentID), SK: fmt.Sprintf("NC#%s#%d.%d", esc(n.ID), n.Replays, n.Attempts)}
}

// NotifyPK is the gsi5 partition of pending notifications of shard n.
func NotifyPK(n int) string { return fmt.Sprintf("NOTIFY#%02d", n) }

// deadPK is the gsi5 partition of the dead notifications of one
// incarnation of a channel: a channel id deleted and taken again by
// someone else starts an empty one.
func deadPK(channel, incarnation string) string {
	return "NDEAD#" + esc(channel) + "#" + esc(incarnation)
}

func timelinePK(agent, about string) string { return "NE#" + esc(agent) + "#" + esc(about) }

func notifyShard(agent, id string) int {
	h := fnv.New32a()
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int(h.Sum32() % NotifyShards)
}

// storedChannel is a channel item's body: the channel and its sealed secret.
type storedChannel struct {
	alert.Channel
	Sealed []byte `json:"sealed,omitempty"`
}

func channelItem(c storedChannel) (store.Item, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: channelKey(c.ID), Type: TypeChannel, Data: b,
		Index: map[store.IndexName]store.IndexKey{store.GSI5: {PK: channelsPK, SK: esc(c.ID)}}}, nil
}

// about is what a notification's timeline entry hangs on: the expectation,
// or the plan of a VERIFY.
func about(n *alert.Notification) string {
	if n.About.ExpectationID != "" {
		return "E#" + n.About.ExpectationID
	}
	if n.Event.Data.PlanID != "" {
		return "P#" + n.Event.Data.PlanID
	}
	return ""
}

// notificationItem maps a notification onto its item, which expires retain
// after it was delivered or dead-lettered (Options.Retain; none while it
// is pending, or when retain is zero).
func notificationItem(n *alert.Notification, retain time.Duration) (store.Item, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return store.Item{}, err
	}
	idx := map[store.IndexName]store.IndexKey{}
	if a := about(n); a != "" {
		idx[store.GSI2] = store.IndexKey{PK: timelinePK(n.AgentID, a), SK: n.CreatedAt + "#" + esc(n.ID)}
	}
	switch {
	case n.Dead:
		idx[store.GSI5] = store.IndexKey{PK: deadPK(n.ChannelID, n.ChannelIncarnation), SK: n.DeadAt + "#" + esc(n.AgentID) + "#" + esc(n.ID)}
	case n.Pending():
		at := n.NextAttempt
		if at == "" {
			at = n.CreatedAt
		}
		idx[store.GSI5] = store.IndexKey{PK: NotifyPK(notifyShard(n.AgentID, n.ID)), SK: at + "#" + esc(n.AgentID) + "#" + esc(n.ID)}
	}
	it := store.Item{Key: notificationKey(n.AgentID, n.ID), Type: TypeNotification, Data: b, Index: idx}
	ended := n.DeliveredAt
	switch {
	case n.Dead:
		ended = n.DeadAt
	case n.Skipped != "":
		ended = n.SkippedAt
	}
	if t, err := expect.ParseTime(ended); err == nil && retain > 0 {
		it.ExpiresAt = expect.ExpiryTime(t, retain).Unix()
	}
	return it, nil
}

func decodeNotification(it store.Item) (*alert.Notification, error) {
	var n alert.Notification
	if err := json.Unmarshal(it.Data, &n); err != nil {
		return nil, fmt.Errorf("decode notification %s: %w", it.Key, err)
	}
	return &n, nil
}
