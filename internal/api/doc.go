// Package api is simpleqd's HTTP front door: it speaks SimpleQ's public wire
// format (shared/spec/api.md) so that code written against SimpleQ's API and
// SDKs works against a self-hosted simpleqd by changing only the base URL.
//
// The package exists to keep the wire contract in one place, apart from the
// queue machinery: it authenticates requests, validates bodies strictly (a bad
// request is always a 4xx with field-level messages, never a 500), maps the
// store's sentinel errors to status codes, and renders jobs and queues in the
// exact JSON shapes of the contract. Everything stateful is behind the Backend,
// Waker and Queues abstractions of backend.go, so the handlers can be tested
// without Redis and a config reload is seen by the next request.
//
// Two properties matter more than the rest:
//   - A published payload is handed to the Backend as the exact bytes the
//     publisher sent (never decoded and re-encoded), so key order and number
//     precision survive to the webhook.
//   - Request logs never contain payloads or API keys.
//
// Layout: one file per resource (jobs.go, callbacks.go, queues.go, health.go,
// admin.go for dead letters, replay and pause/resume, events.go for a
// queue's recent events as this daemon recorded them, openapi.go for the
// API's own description, docs/openapi.json) each with a register*Routes
// method called from server.go; shared request plumbing lives
// in auth.go, validate.go (body reading and field validation) and errors.go
// (error bodies and backend error mapping). A new resource adds one file with
// its own register*Routes method and reuses lookupQueue, readObject, the
// validator, queueView/jobView and backendError, and describes its route in
// docs/openapi.json (TestOpenAPIDescribesEveryRoute and test/openapi_test.go
// fail until it does).
package api
