// Package api embeds Kassa's OpenAPI 3.1 description, api/openapi.yaml, so that tests can hold the
// router to it.
package api

import _ "embed"

// OpenAPI is the text of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
