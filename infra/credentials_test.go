package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCredentialsKey: one KMS key with rotation seals agents' outbound
// credentials; the API function may only generate data keys with it, the
// functions that send lapse tasks (stream, clock) may only decrypt, and
// the authorizer may do neither.
func TestCredentialsKey(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tj := sy.json
			keys := resources(tj, "AWS::KMS::Key")
			if len(keys) != 1 {
				t.Fatalf("%d KMS keys, want 1", len(keys))
			}
			var keyID string
			for id, k := range keys {
				keyID = id
				if props(k)["EnableKeyRotation"] != true {
					t.Errorf("credentials key without rotation: %v", props(k))
				}
			}
			want := fmt.Sprint([]any{getAtt(keyID, "Arn")})
			grants := map[string]map[string]bool{
				// The API function opens channel secrets only (a channel's
				// test): its Decrypt is conditioned on the encryption
				// context, checked below.
				"api":        {"kms:GenerateDataKey": true, "kms:Decrypt": true},
				"stream":     {"kms:Decrypt": true},
				"clock":      {"kms:Decrypt": true},
				"authorizer": {},
			}
			for name, allowed := range grants {
				acts := actionsOf(statementsOfRole(tj, roleOfFunction(t, tj, "clockwork-"+stage+"-"+name)))
				for _, a := range []string{"kms:GenerateDataKey", "kms:Decrypt", "kms:Encrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:CreateGrant"} {
					got := acts[a] != nil
					if got != allowed[a] {
						t.Errorf("%s function: %s granted = %v, want %v", name, a, got, allowed[a])
					}
					if got && fmt.Sprint(acts[a]) != want {
						t.Errorf("%s function: %s on %v, want the credentials key only", name, a, acts[a])
					}
				}
			}
			for _, st := range statementsOfRole(tj, roleOfFunction(t, tj, "clockwork-"+stage+"-api")) {
				if fmt.Sprint(st["Action"]) != "kms:Decrypt" {
					continue
				}
				cond := fmt.Sprint(st["Condition"])
				if !strings.Contains(cond, "kms:EncryptionContext:clockwork:agent:"+ChannelSealAgent) {
					t.Errorf("api function: kms:Decrypt without the channel encryption context condition: %v", st)
				}
			}
		})
	}
}
