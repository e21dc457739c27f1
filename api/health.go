package api

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// readyTimeout bounds a readiness check so a hung Redis makes the probe fail
// rather than hang.
const readyTimeout = 2 * time.Second

// registerHealthRoutes: liveness and readiness probes, open without a key.
func (s *Server) registerHealthRoutes() {
	s.mux.HandleFunc("GET /healthz", s.handleHealthz)
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
}

type statusJSON struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// handleHealthz answers 200 while the process serves HTTP at all.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.respond(w, r, http.StatusOK, statusJSON{Status: "ok"})
}

// handleReadyz answers 200 when the Backend can serve (Redis reachable,
// scripts loaded), else 503 so load balancers route around this daemon.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.backend.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", zap.Error(err))
		w.Header().Set("Retry-After", msgRetryAfter)
		s.respond(w, r, http.StatusServiceUnavailable, statusJSON{Status: "unavailable", Error: "not ready"})
		return
	}
	s.respond(w, r, http.StatusOK, statusJSON{Status: "ok"})
}
