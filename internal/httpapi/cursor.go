package httpapi

import (
	"encoding/base64"
	"strconv"
)

// EncodeCursor makes the opaque paging cursor of a position in a list ordered by id.
func EncodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("t" + strconv.FormatInt(id, 10)))
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != 't' {
		return 0, false
	}
	id, err := strconv.ParseInt(string(b[1:]), 10, 64)
	return id, err == nil && id > 0
}
