package auth

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"
)

func testSealer(t testing.TB) *sealer {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	s, err := newSealer(map[byte][]byte{1: k}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testClaims() Claims {
	now := time.Unix(1_800_000_000, 0)
	return Claims{TokenID: newTokenID(), ClientID: newTokenID(), MerchantID: "0a1b2c3d4e", Scopes: DefaultScopes,
		IssuedAt: now, ExpiresAt: now.Add(12 * time.Hour)}
}

func TestSealRoundTrip(t *testing.T) {
	t.Parallel()
	s := testSealer(t)
	c := testClaims()
	tok := s.seal(c)
	if len(tok) != tokenLen || !strings.HasPrefix(tok, "kat_") {
		t.Fatalf("token %q has length %d, want %d", tok, len(tok), tokenLen)
	}
	got, err := s.open(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("open(seal(c)) = %+v, want %+v", got, c)
	}
	// The last character carries 4 bits of the token and 2 bits of padding: another spelling of the
	// same bytes must not be a second valid token.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	if _, err := s.open(tok[:len(tok)-1] + string(alphabet[last^1])); err == nil {
		t.Fatal("a second spelling of the token is accepted")
	}
	if s.seal(c) == tok {
		t.Fatal("two seals of the same claims are equal: the nonce is not random")
	}
	if strings.Contains(tok, c.MerchantID) {
		t.Fatal("the token shows the merchant id in clear")
	}
}

// FuzzOpenToken: whatever a client sends as a bearer token, open never panics and accepts nothing it
// did not seal.
func FuzzOpenToken(f *testing.F) {
	s := testSealer(f)
	good := s.seal(testClaims())
	f.Add(good)
	f.Add(good[:len(good)-1] + "A")
	f.Add("kat_")
	f.Add("")
	f.Add(strings.Repeat("A", tokenLen))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.open(tok)
		if err == nil && tok != good {
			t.Fatalf("open accepted a token it did not seal: %q -> %+v", tok, c)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	s := &Service{sealer: testSealer(b), now: time.Now}
	s.revoked.cur.Store(&revoked{})
	c := testClaims()
	c.IssuedAt, c.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	tok := s.sealer.seal(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	c := testClaims()
	c.ClientID = [16]byte{0xab}
	want := "client:ab000000000000000000000000000000"
	if p := c.Principal(); p.Account != "acct_0a1b2c3d4e" || p.Credential != want {
		t.Fatalf("client-credentials token: principal %+v", p)
	}
	// A token of a grant (a partner's approval, a password sign-in) is its client's: another grant of
	// the same client must find the same idempotency records.
	c.GrantID = [16]byte{0xcd}
	if p := c.Principal(); p.Account != "acct_0a1b2c3d4e" || p.Credential != want {
		t.Fatalf("token of a grant: principal %+v", p)
	}
}
