package api

import (
	"net/http"

	"github.com/simpleq/simpleqd/docs"
)

// openAPIPath serves the API's own description. It is in publicPaths: a
// client or an SDK's contract check may read it before it has a key, and it
// holds nothing secret.
const openAPIPath = "/v1/openapi.json"

// registerOpenAPIRoutes: the OpenAPI 3.1 description of every endpoint
// (docs/openapi.json, embedded by package docs). test/openapi_test.go
// validates live answers against it, so it cannot drift from the handlers.
func (s *Server) registerOpenAPIRoutes() {
	s.mux.HandleFunc("GET /v1/openapi.json", s.handleOpenAPI)
}

// handleOpenAPI is GET /v1/openapi.json: the committed document as it is.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	writeEncoded(w, http.StatusOK, docs.OpenAPI())
}
