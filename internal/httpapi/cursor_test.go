package httpapi_test

import (
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/httpapi"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []int64{1, 42, 1 << 40} {
		if got, ok := httpapi.DecodeCursor(httpapi.EncodeCursor(id)); !ok || got != id {
			t.Fatalf("cursor of %d decodes to %d, %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "dA", "!!", "eDU", strings.Repeat("A", 40)} {
		if _, ok := httpapi.DecodeCursor(bad); ok {
			t.Fatalf("httpapi.DecodeCursor(%q) accepted", bad)
		}
	}
}
