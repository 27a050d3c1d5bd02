package evaluation

import (
	"encoding/json"
	"testing"
)

// TestStoredEventType: a stored event's type is read from message_type, and
// from event_type for an event stored before events were RFC-032 messages;
// it is written as message_type only.
func TestStoredEventType(t *testing.T) {
	for raw, want := range map[string]string{
		`{"seq":1,"event_id":"e","message_type":"STEP_COMPLETE","event":{},"prev":"","digest":"d"}`: "STEP_COMPLETE",
		`{"seq":1,"event_id":"e","event_type":"TOOL_REQUEST","event":{},"prev":"","digest":"d"}`:    "TOOL_REQUEST",
	} {
		var e StoredEvent
		if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Type != want || e.Seq != 1 || e.EventID != "e" || e.Digest != "d" {
			t.Errorf("%s: %+v %v", raw, e, err)
		}
		out, _ := json.Marshal(e)
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		if m["message_type"] != want || m["event_type"] != nil {
			t.Errorf("%s: encoded as %s", raw, out)
		}
	}
}
