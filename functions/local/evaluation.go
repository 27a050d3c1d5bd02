package main

import (
	"log/slog"
	"net/http"

	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// evaluationRoutes and evaluationHandlers wire the evaluation loop
// (ANTICIPATE/VERIFY) into the embedded runtime.
func evaluationRoutes(log *slog.Logger) []func(*http.ServeMux, *httpapi.Handler) { return nil }

func evaluationHandlers(log *slog.Logger) map[string]feed.Handler { return nil }
