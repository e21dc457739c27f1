package app

import (
	"net/http"
	"net/http/pprof"

	"go.uber.org/zap"
)

// pprofEnv names the variable that turns the profiler listener on; it is
// the daemon's own switch, not a setting.
const pprofEnv = "SIMPLEQD_PPROF_LISTEN"

// startPprof serves Go's profiler on addr when SIMPLEQD_PPROF_LISTEN is set: a
// debugging aid for performance work (see docs/performance.md), off by
// default and never on the API listener.
func startPprof(addr string, log *zap.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Warn("pprof enabled", zap.String("addr", addr))
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			log.Error("pprof listener failed", zap.Error(err))
		}
	}()
}
