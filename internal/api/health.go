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
	Status string     `json:"status"`
	Error  string     `json:"error,omitempty"`
	Redis  *RedisMode `json:"redis,omitempty"`
}

// RedisMode is what /readyz says about how the daemon reaches Redis
// (production.md §1), so a probe or an operator can confirm a fleet is on
// Sentinel, on TLS or on replicated durability. /readyz needs no key, so it
// carries no addresses, users or file names (`simpleqd check` and the
// start-up log show those).
type RedisMode struct {
	// Mode is single, cluster, sentinel or embedded.
	Mode string `json:"mode"`
	// TLS is off, on or mutual (a client certificate is presented).
	TLS string `json:"tls"`
	// Durability is local or replicated.
	Durability string `json:"durability"`
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
		s.respond(w, r, http.StatusServiceUnavailable, statusJSON{Status: "unavailable", Error: "not ready", Redis: s.redisMode})
		return
	}
	s.respond(w, r, http.StatusOK, statusJSON{Status: "ok", Redis: s.redisMode})
}
