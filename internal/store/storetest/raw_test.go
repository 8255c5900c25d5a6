package storetest

import "testing"

// A CVV inside a millisecond timestamp is another number; the same digits as a value of their own are
// the CVV.
func TestStandsAlone(t *testing.T) {
	for data, want := range map[string]bool{
		`(1795735218317,)`:         false,
		`83170`:                    false,
		`{"cvv2":"8317"}`:          true,
		"8317":                     true,
		"12083171 and then 8317":   true,
		"8317 is at the start":     true,
		"no digits like that here": false,
		"x 3831 7 x":               false,
	} {
		if got := standsAlone(data, "8317"); got != want {
			t.Errorf("standsAlone(%q) = %v, want %v", data, got, want)
		}
	}
}
