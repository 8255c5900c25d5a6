package acquirer_test

import (
	"strings"
	"testing"

	"github.com/moov-io/iso8583"

	"github.com/kassapay/kassa/internal/acquirer"
)

// "bitmap as 16 hex characters per 64 fields (a secondary bitmap when field 90 is present)": a
// message without field 90 carries 16, one with it 32 and bit 1 set. A host that read Spec87ASCII's
// fixed 32 would not understand a connector built to the profile.
func TestBitmapIsTheProfiles(t *testing.T) {
	t.Parallel()
	original := strings.Repeat("0", 42)
	for _, tc := range []struct {
		fields map[int]string
		packed string
	}{
		{map[int]string{3: "000000", 11: "000001"}, "0400" + "2020000000000000" + "000000" + "000001"},
		{map[int]string{3: "000000", 11: "000001", 90: original}, "0400" + "A0200000000000000000004000000000" + "000000" + "000001" + original},
	} {
		m := iso8583.NewMessage(acquirer.Spec)
		m.MTI("0400")
		for id, v := range tc.fields {
			if err := m.Field(id, v); err != nil {
				t.Fatal(err)
			}
		}
		packed, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if string(packed) != tc.packed {
			t.Errorf("fields %v packed as %q, want %q", tc.fields, packed, tc.packed)
		}
		back := iso8583.NewMessage(acquirer.Spec)
		if err := back.Unpack(packed); err != nil {
			t.Fatalf("unpack %q: %v", packed, err)
		}
		if v, _ := back.GetString(11); v != "000001" {
			t.Errorf("field 11 read back as %q", v)
		}
	}
}
