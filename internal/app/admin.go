package app

import (
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolsd/toolsd/internal/auth"
)

// adminServer serves /metrics, /healthz (the process is up), /readyz (it accepts
// batches: SERVING, not draining, its session store not stopped) and, when
// debug.pprof is on, /debug/pprof/.
func (a *App) adminServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{Registry: a.metrics}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !a.ready(r.Context()) {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	if a.cfg.Debug.Pprof {
		auth.WarnIfPprofExposed(a.cfg.AdminListen, a.log)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// An idle keep-alive connection is closed after IdleTimeout: without one, a
	// scraper's connection would be held for as long as it stays open. No WriteTimeout:
	// /debug/pprof/profile and /trace write for as long as they are asked to record.
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
}
