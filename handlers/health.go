package handlers

import (
	"net/http"
)

// Health answers the liveness and readiness probes.
type Health struct {
	*Base
}

// NewHealth returns the probe handler.
func NewHealth(b *Base) *Health { return &Health{Base: b} }

// Live answers 200 while the process serves requests.
func (h *Health) Live(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// Ready answers 200 while the database answers, 503 otherwise.
func (h *Health) Ready(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.DB.Ping(r.Context()); err != nil {
		h.Logger.Warn("readiness: database does not answer", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("database unavailable\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}
