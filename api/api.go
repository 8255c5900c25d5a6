// Package api embeds Kassa's OpenAPI 3.1 description, api/openapi.yaml, so that tests can hold the
// router to it and the server can show it as its API reference (internal/apidocs).
package api

import _ "embed"

// OpenAPI is the text of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
