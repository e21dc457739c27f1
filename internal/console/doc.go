// Package console is simpleqd's web console: a small single-page app, served
// by the daemon itself at /console/, that shows each queue's live counts and
// backpressure state (open, held with a countdown, probing with the probe's
// job, paused), a queue's recent timeline, a job's full history, and the
// dead-letter list with replay, pause and resume buttons.
//
// Why it is shaped this way:
//
//   - Served by the daemon, embedded in the binary (go:embed). Operators get
//     a console wherever a daemon runs, with no second server to deploy, no
//     CDN, and no version skew between console and API: the assets are the
//     ones built into the binary that answers the API calls.
//   - Plain HTML, CSS and vanilla JavaScript modules, written by hand, with
//     no build step and no npm dependencies. Nothing needs building or
//     vendoring, so `go build` is the whole build, and the files served are
//     the files in the repository.
//   - A client of the public JSON API and nothing else. Every piece of data
//     comes from /v1/... with the same Bearer API keys as any other client,
//     so the console can show and do only what the API allows, and adds no
//     server-side session, cookie or privileged path. The static assets load
//     without a key (they contain no data); the key is entered once, kept in
//     sessionStorage (gone when the tab closes) and sent on every fetch; a
//     401 returns to the login form. A daemon without API keys (loopback
//     development) needs no login.
//   - Polling, not push. The queue list and queue page poll GET /v1/queues
//     and GET /v1/queues/{queue}/events about once a second; a console is
//     watched by a handful of operators, and polling reuses the API as is.
//   - Safe by construction: data is only ever inserted as text (never as
//     HTML), and every asset is served with a strict Content-Security-Policy
//     (scripts and styles from the console's own origin only), so a job
//     payload or error message cannot run script in an operator's browser
//     where the API key lives.
//
// The timeline comes from GET /v1/queues/{queue}/events (package events): it
// is the answering daemon's in-memory record, so in a fleet behind a load
// balancer it shows one daemon's share of deliveries. Durable facts (counts,
// hold state, job histories, dead letters) are read from Redis through the
// API and are fleet-wide.
package console
