// Command webhook-receiver is the smallest receiver of clockwork's webhook
// notifications: it verifies each one with the Standard Webhooks library
// (the secret is the whsec_ value the channel's PUT set or answered) and
// prints what happened. README.md shows its handler.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver answers 204 to a notification whose signature verifies, 401 to
// any other request; a retried notification carries the same webhook-id.
func receiver(secret string) (http.Handler, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				AgentID string `json:"agentId"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		fmt.Printf("%s %s for agent %s\n", r.Header.Get("webhook-id"), ev.Type, ev.Data.AgentID)
		w.WriteHeader(http.StatusNoContent)
	}), nil
}

func main() {
	h, err := receiver(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal("WEBHOOK_SECRET: ", err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:9000", h))
}
