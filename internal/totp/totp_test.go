package totp

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// rfcSecret is the ASCII key of the test vectors of RFC 4226 (Appendix D) and RFC 6238 (Appendix B,
// SHA-1).
var rfcSecret = Secret("12345678901234567890")

// TestHOTPVectors: RFC 4226, Appendix D, the HOTP value of counts 0 to 9.
func TestHOTPVectors(t *testing.T) {
	want := []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}
	for count, w := range want {
		if got := Code(rfcSecret, int64(count)); got != w {
			t.Errorf("Code(count %d) = %s, want %s", count, got, w)
		}
	}
}

// TestTOTPVectors: RFC 6238, Appendix B, SHA-1 (8 digits there; an authenticator's 6 are the last six).
func TestTOTPVectors(t *testing.T) {
	for _, v := range []struct {
		unix int64
		want string
	}{{59, "94287082"}, {1111111109, "07081804"}, {1111111111, "14050471"}, {1234567890, "89005924"},
		{2000000000, "69279037"}, {20000000000, "65353130"}} {
		now := time.Unix(v.unix, 0)
		if got := Code(rfcSecret, Step(now)); got != v.want[2:] {
			t.Errorf("at %d: %s, want %s", v.unix, got, v.want[2:])
		}
		if _, ok := Verify(rfcSecret, v.want[2:], now, 0); !ok {
			t.Errorf("at %d: Verify refused the code", v.unix)
		}
	}
}

func TestVerifyWindowAndReuse(t *testing.T) {
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 15, 0, time.UTC)
	cur := Step(now)
	for _, c := range []struct {
		step int64
		ok   bool
	}{{cur - 2, false}, {cur - 1, true}, {cur, true}, {cur + 1, true}, {cur + 2, false}} {
		if got, ok := Verify(s, Code(s, c.step), now, 0); ok != c.ok || (ok && got != c.step) {
			t.Errorf("step %+d: Verify = %d, %v; want ok %v", c.step-cur, got, ok, c.ok)
		}
	}
	// Each code is used once: the step that matched, passed back, refuses it and every earlier one.
	step, ok := Verify(s, Code(s, cur), now, 0)
	if !ok {
		t.Fatal("the current code was refused")
	}
	if _, ok := Verify(s, Code(s, cur), now, step); ok {
		t.Error("the same code was accepted twice")
	}
	if _, ok := Verify(s, Code(s, cur-1), now, step); ok {
		t.Error("an earlier step's code was accepted after a later one")
	}
	if _, ok := Verify(s, Code(s, cur+1), now, step); !ok {
		t.Error("the next step's code was refused")
	}
	// People type codes with a space in the middle.
	code := Code(s, cur)
	if _, ok := Verify(s, code[:3]+" "+code[3:], now, 0); !ok {
		t.Error("a code with a space was refused")
	}
}

func TestVerifyRefusesWhatIsNotACode(t *testing.T) {
	s := rfcSecret
	now := time.Unix(59, 0)
	for _, code := range []string{"", "28708", "2870821", "28708a", "-28708", "+287082", "２８７０８２"} {
		if _, ok := Verify(s, code, now, 0); ok {
			t.Errorf("Verify(%q) accepted", code)
		}
	}
}

func TestSecretRoundTrip(t *testing.T) {
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != SecretSize {
		t.Fatalf("secret of %d bytes", len(s))
	}
	key := s.String()
	if strings.ContainsAny(key, "=abcdefghijklmnopqrstuvwxyz") || len(key) != 32 {
		t.Errorf("key %q is not 32 characters of unpadded upper-case base32", key)
	}
	spaced := strings.ToLower(key[:4] + " " + key[4:8] + " " + key[8:])
	for _, in := range []string{key, spaced} {
		back, err := ParseSecret(in)
		if err != nil || string(back) != string(s) {
			t.Errorf("ParseSecret(%q) = %x, %v", in, back, err)
		}
	}
	for _, bad := range []string{"", "ABC", "1111111111111111", encoding.EncodeToString(make([]byte, 15))} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted", bad)
		}
	}
}

func TestURI(t *testing.T) {
	uri := URI(rfcSecret, "Kassa", "owner@example.com")
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "otpauth" || u.Host != "totp" || u.Path != "/Kassa:owner@example.com" {
		t.Errorf("URI %s", uri)
	}
	q := u.Query()
	if q.Get("secret") != "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" || q.Get("issuer") != "Kassa" || q.Get("algorithm") != "SHA1" ||
		q.Get("digits") != "6" || q.Get("period") != "30" {
		t.Errorf("URI parameters %v", q)
	}
}

// FuzzVerify: whatever a person types as a code, Verify does not panic, and what it accepts is six
// digits that are one of the window's codes.
func FuzzVerify(f *testing.F) {
	for _, seed := range []string{"287082", "287 082", "", "abcdef", "99999999999"} {
		f.Add(seed)
	}
	now := time.Unix(59, 0)
	f.Fuzz(func(t *testing.T, code string) {
		step, ok := Verify(rfcSecret, code, now, 0)
		if ok && Code(rfcSecret, step) != strings.Join(strings.Fields(code), "") {
			t.Errorf("Verify(%q) accepted step %d", code, step)
		}
	})
}

// FuzzParseSecret: a key typed by a person never panics the parser, and one it accepts has 128 bits.
func FuzzParseSecret(f *testing.F) {
	for _, seed := range []string{"GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ", "gezd gnbv", "", "===="} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if s, err := ParseSecret(key); err == nil && len(s) < 16 {
			t.Errorf("ParseSecret(%q) = %d bytes", key, len(s))
		}
	})
}
