// Package credentialstest is the contract suite of credentials storage:
// every store adapter and every Sealer runs Run, so that secrets are sealed
// at rest, replaced by a new PUT, removed by DELETE and bound to their
// agent and scheme alike on the embedded default and on AWS.
package credentialstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// Card returns a parsed card for agentID declaring a bearer scheme
// "bearer" and an API key scheme "key" (header X-Api-Key).
func Card(t testing.TB, agentID string) expect.Card {
	t.Helper()
	raw := `{"name":"n","description":"d","version":"1","defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
"supportedInterfaces":[{"url":"https://agent.example.com/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
"capabilities":{"extensions":[{"uri":"` + expect.URI + `","params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"The customer pays.","basis":"contract"}]}}]},
"skills":[{"id":"lapse","name":"lapse","description":"d","tags":["t"]}],
"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{"scheme":"Bearer"}},"key":{"apiKeySecurityScheme":{"location":"header","name":"X-Api-Key"}}},
"securityRequirements":[{"schemes":{"bearer":[]}},{"schemes":{"key":[]}}]}`
	card, err := expect.ParseCard(agentID, []byte(raw))
	if err != nil {
		t.Fatalf("credentialstest card: %v", err)
	}
	return card
}

func secret(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s3cret-" + hex.EncodeToString(b)
}

// Run runs the contract against a store from newStore sealed with sealer.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, sealer credentials.Sealer) {
	ctx := context.Background()
	t.Run("PutLoadReplaceDelete", func(t *testing.T) {
		st := newStore(t)
		svc := credentials.New(st, sealer, credentials.Options{})
		agent := "agent-" + secret(t)[7:15]
		card := Card(t, agent)
		tok, key := secret(t), secret(t)
		body := `{"credentials":{"bearer":{"token":"` + tok + `"},"key":{"key":"` + key + `"}}}`
		names, err := svc.Put(ctx, card, []byte(body))
		if err != nil || !slices.Equal(names, []string{"bearer", "key"}) {
			t.Fatalf("Put = %v, %v", names, err)
		}
		if got, err := svc.Configured(ctx, agent); err != nil || !slices.Equal(got, names) {
			t.Fatalf("Configured = %v, %v", got, err)
		}
		set, err := svc.Load(ctx, agent)
		if err != nil || set["bearer"].Token != tok || set["key"].Key != key {
			t.Fatalf("Load: %v (bearer ok %v, key ok %v)", err, set["bearer"].Token == tok, set["key"].Key == key)
		}
		it, err := st.Get(ctx, watcher.CredentialsKey(agent))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(it)
		for _, s := range []string{tok, key} {
			if bytes.Contains(raw, []byte(s)) || bytes.Contains(raw, []byte(hex.EncodeToString([]byte(s)))) {
				t.Fatal("the stored item holds a secret in clear")
			}
		}

		// Rotation: the next Load sees the new value at once, cache or not.
		tok2 := secret(t)
		if _, err := svc.Put(ctx, card, []byte(`{"credentials":{"bearer":{"token":"`+tok2+`"}}}`)); err != nil {
			t.Fatal(err)
		}
		set, err = svc.Load(ctx, agent)
		if err != nil || set["bearer"].Token != tok2 || len(set) != 1 {
			t.Fatalf("after rotation: %v, %d schemes, new token %v", err, len(set), set["bearer"].Token == tok2)
		}

		// A refused body changes nothing.
		_, err = svc.Put(ctx, card, []byte(`{"credentials":{"bearer":{"token":"x","key":"y"}}}`))
		if !errs.Is(err, errs.Invalid) {
			t.Fatalf("bad Put = %v", err)
		}
		if set, _ := svc.Load(ctx, agent); set["bearer"].Token != tok2 {
			t.Fatal("a refused Put changed the stored credentials")
		}

		if err := svc.Delete(ctx, agent); err != nil {
			t.Fatal(err)
		}
		if got, err := svc.Configured(ctx, agent); err != nil || len(got) != 0 {
			t.Fatalf("after Delete: %v, %v", got, err)
		}
		if set, err := svc.Load(ctx, agent); err != nil || len(set) != 0 {
			t.Fatalf("Load after Delete: %d schemes, %v", len(set), err)
		}
		if err := svc.Delete(ctx, agent); err != nil {
			t.Fatalf("second Delete: %v", err)
		}
	})
	t.Run("BoundToAgentAndScheme", func(t *testing.T) {
		plain := []byte(secret(t))
		sealed, err := sealer.Seal(ctx, plain, "agent-a", "bearer")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, plain) {
			t.Fatal("sealed value holds the plaintext")
		}
		if got, err := sealer.Open(ctx, sealed, "agent-a", "bearer"); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open = %v", err)
		}
		for _, other := range [][2]string{{"agent-b", "bearer"}, {"agent-a", "key"}} {
			if _, err := sealer.Open(ctx, sealed, other[0], other[1]); err == nil {
				t.Errorf("a value sealed for agent-a/bearer opened as %s/%s", other[0], other[1])
			}
		}
		tampered := slices.Clone(sealed)
		tampered[len(tampered)-1] ^= 1
		if _, err := sealer.Open(ctx, tampered, "agent-a", "bearer"); err == nil {
			t.Error("a tampered value opened")
		}
		if _, err := sealer.Open(ctx, nil, "agent-a", "bearer"); err == nil || errors.Is(err, nil) {
			t.Error("an empty value opened")
		}
	})
}
