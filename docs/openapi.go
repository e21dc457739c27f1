// Package docs holds simpleqd's documentation. Its only Go code embeds
// openapi.json, the OpenAPI 3.1 description of the HTTP API, so that the
// daemon serves the committed file itself (GET /v1/openapi.json): there is
// one copy, and what operators read under docs/ is byte for byte what a
// running daemon answers.
package docs

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the bytes of docs/openapi.json. The slice is shared by
// every caller and must not be modified.
func OpenAPI() []byte { return openAPI }
