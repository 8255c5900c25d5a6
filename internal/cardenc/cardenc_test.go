package cardenc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/cardenc/cardenctest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture is a card-encryption service over db with a manual clock and two merchants.
type fixture struct {
	svc   *cardenc.Service
	clock *clock.Manual
	db    *store.DB
	m1    string
	m2    string
}

func newFixture(t *testing.T, db *store.DB) *fixture {
	t.Helper()
	ctx := context.Background()
	kek, _ := envelope.ParseKEK(envelope.NewKEKText())
	f := &fixture{clock: clock.NewManual(time.Now()), db: db, m1: "a000000001", m2: "a000000002"}
	ring, err := envelope.NewKeyring(ctx, db, kek, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{f.m1, f.m2} {
		if err := db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
				VALUES ($1, 'Shop', $2, $2, 'CAD', 0)`, id, id+"@example.com")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	f.svc = cardenc.New(cardenc.Config{DB: db, Keyring: ring, Now: f.clock.Now})
	return f
}

// publicKey parses the hex-of-PEM form merchants are given.
func publicKey(t *testing.T, k cardenc.PublicKey) (*rsa.PublicKey, []byte) {
	t.Helper()
	raw, err := hex.DecodeString(k.Encoded())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PUBLIC KEY" {
		t.Fatalf("not a PEM public key: %q", raw)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub.(*rsa.PublicKey), block.Bytes
}

// goToken makes a token in Go, as the script does, from any plaintext.
func goToken(t *testing.T, k cardenc.PublicKey, plain string) string {
	t.Helper()
	pub, _ := publicKey(t, k)
	ct, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, []byte(plain), nil)
	if err != nil {
		t.Fatal(err)
	}
	return "ct1." + k.ID + "." + base64.RawURLEncoding.EncodeToString(ct)
}

func payload(number, month, year, cvv string, at time.Time) string {
	return fmt.Sprintf(`{"n":%q,"m":%q,"y":%q,"c":%q,"t":%d}`, number, month, year, cvv, at.UnixMilli())
}

func TestKeysAndRotation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		k, err := f.svc.Current(ctx, f.m1)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := f.svc.Current(ctx, f.m1)
		if again.ID != k.ID {
			t.Fatal("Current made a second pair")
		}
		pub, der := publicKey(t, k)
		if pub.N.BitLen() != 2048 || k.ID != cardenc.KeyID(der) || len(k.ID) != 16 {
			t.Fatalf("key %s: %d bits", k.ID, pub.N.BitLen())
		}
		for _, c := range k.Encoded() {
			if !strings.ContainsRune("0123456789abcdef", c) {
				t.Fatalf("public_encryption_key is not alphanumeric: %q", c)
			}
		}
		// The private key is stored sealed: neither its PEM nor its DER is in the database.
		var sealed []byte
		db.Reader().QueryRowContext(ctx, "SELECT private_key FROM card_encryption_keys WHERE id = $1", k.ID).Scan(&sealed)
		if bytes.Contains(sealed, []byte("PRIVATE")) || bytes.Contains(sealed, pub.N.Bytes()[:32]) || len(sealed) < 1000 {
			t.Fatalf("private key stored in clear or not at all (%d bytes)", len(sealed))
		}

		old := goToken(t, k, payload(cardtest.Visa, "12", "30", "123", f.clock.Now()))
		next, err := f.svc.Rotate(ctx, f.m1, 48*time.Hour)
		if err != nil || next.ID == k.ID {
			t.Fatalf("Rotate: %v", err)
		}
		if cur, _ := f.svc.Current(ctx, f.m1); cur.ID != next.ID {
			t.Fatal("the new pair is not current")
		}
		if _, err := f.svc.Open(ctx, f.m1, old); err != nil {
			t.Fatalf("a token of the previous key within the grace period: %v", err)
		}
		if _, err := f.svc.Open(ctx, f.m1, goToken(t, next, payload(cardtest.Visa, "12", "30", "123", f.clock.Now()))); err != nil {
			t.Fatalf("a token of the new key: %v", err)
		}
		f.clock.Advance(48*time.Hour + time.Second)
		fresh := goToken(t, k, payload(cardtest.Visa, "12", "30", "123", f.clock.Now()))
		if _, err := f.svc.Open(ctx, f.m1, fresh); !errors.Is(err, cardenc.ErrInvalidToken) {
			t.Fatalf("a token of the previous key after the grace period: %v", err)
		}
	})
}

func TestOpenRejectsUniformly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		k1, _ := f.svc.Current(ctx, f.m1)
		k2, _ := f.svc.Current(ctx, f.m2)
		now := f.clock.Now()
		good := goToken(t, k1, payload(cardtest.Amex, "7", "2031", "1234", now))
		c, err := f.svc.Open(ctx, f.m1, good)
		if err != nil || c.Number.Digits() != cardtest.Amex || c.Expiry.Month != 7 || c.Expiry.Year != 2031 || c.CVV != "1234" {
			t.Fatalf("good token: %+v, %v", c, err)
		}
		ct := good[len("ct1.")+17:]
		for name, tok := range map[string]string{
			"empty":                   "",
			"garbage":                 "hello",
			"other version":           "ct2." + k1.ID + "." + ct,
			"unknown key":             "ct1.0123456789abcdef." + ct,
			"short key id":            "ct1.0123." + ct,
			"bad base64":              "ct1." + k1.ID + ".!!!" + ct[3:],
			"short ciphertext":        "ct1." + k1.ID + "." + ct[:100],
			"tampered ciphertext":     "ct1." + k1.ID + "." + flip(ct),
			"another merchant's key":  goToken(t, k2, payload(cardtest.Visa, "12", "30", "123", now)),
			"older than a day":        goToken(t, k1, payload(cardtest.Visa, "12", "30", "123", now.Add(-25*time.Hour))),
			"from the future":         goToken(t, k1, payload(cardtest.Visa, "12", "30", "123", now.Add(2*time.Hour))),
			"not JSON":                goToken(t, k1, "4242424242424242|12|30|123"),
			"Luhn fails":              goToken(t, k1, payload("4242424242424241", "12", "30", "123", now)),
			"number with spaces":      goToken(t, k1, payload("4242 4242 4242 4242", "12", "30", "123", now)),
			"month 13":                goToken(t, k1, payload(cardtest.Visa, "13", "30", "123", now)),
			"three-digit year":        goToken(t, k1, payload(cardtest.Visa, "12", "203", "123", now)),
			"three-digit Amex CVV":    goToken(t, k1, payload(cardtest.Amex, "12", "30", "123", now)),
			"no CVV":                  goToken(t, k1, payload(cardtest.Visa, "12", "30", "", now)),
			"numbers instead of text": goToken(t, k1, `{"n":4242424242424242,"m":12,"y":30,"c":123,"t":`+fmt.Sprint(now.UnixMilli())+`}`),
		} {
			if _, err := f.svc.Open(ctx, f.m1, tok); !errors.Is(err, cardenc.ErrInvalidToken) {
				t.Errorf("%s: %v, want ErrInvalidToken", name, err)
			}
		}
	})
}

func flip(s string) string {
	b := []byte(s)
	if b[50] == 'A' {
		b[50] = 'B'
	} else {
		b[50] = 'A'
	}
	return string(b)
}

// Go opens what the script encrypts, for every length of every brand's card numbers.
func TestScriptTokensOpenInGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, storetest.SQLite(t))
	k, err := f.svc.Current(ctx, f.m1)
	if err != nil {
		t.Fatal(err)
	}
	cards := [][4]string{
		{"4222222222222", "1", "30", "123"},        // Visa, 13 digits
		{cardtest.Visa, "08", "2030", "123"},       // Visa, 16
		{"4111111111111111003", "12", "31", "123"}, // Visa, 19
		{cardtest.Mastercard, "1", "29", "999"},    // Mastercard, 16
		{cardtest.Amex, "11", "30", "1234"},        // Amex, 15
		{cardtest.Discover, "02", "30", "000"},     // Discover, 16
		{"3566002020360505", "12", "30", "123"},    // JCB, 16
		{"36227206271667", "12", "30", "123"},      // Diners, 14
		{"6200000000000005", "12", "30", "123"},    // UnionPay, 16
		{"6200000000000000000", "12", "30", "123"}, // UnionPay, 19
	}
	tokens := cardenctest.Encrypt(t, cardenctest.Input{Key: k.Encoded(), Cards: cards})
	for i, tok := range tokens {
		c, err := f.svc.Open(ctx, f.m1, tok)
		if err != nil {
			t.Errorf("%s…: %v (%s)", cards[i][0][:6], err, tok)
			continue
		}
		want := cards[i]
		year := want[2]
		if len(year) == 2 {
			year = "20" + year
		}
		if c.Number.Digits() != want[0] || fmt.Sprint(c.Expiry.Month) != strings.TrimLeft(want[1], "0") ||
			fmt.Sprint(c.Expiry.Year) != year || c.CVV != want[3] {
			t.Errorf("%s…: opened %v %v %s", want[0][:6], c.Number, c.Expiry, c.CVV)
		}
	}
}

// With the same seed, the script's RSA-OAEP encryption is bit for bit Go's crypto/rsa EncryptOAEP
// (SHA-256, MGF1-SHA-256, empty label): the script's hand-written SHA-256, MGF1, OAEP encoding and
// modular exponentiation agree with the standard library's.
func TestScriptMatchesGoOAEP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	k, err := f.svc.Current(context.Background(), f.m1)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := publicKey(t, k)
	for _, seed := range []string{strings.Repeat("00", 32), strings.Repeat("ff", 32), "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"} {
		const now = 1795300000000
		got := cardenctest.Encrypt(t, cardenctest.Input{Key: k.Encoded(), Cards: [][4]string{{cardtest.Visa, "08", "30", "123"}}, Seed: seed, Now: now})[0]
		s, _ := hex.DecodeString(seed)
		ct, err := rsa.EncryptOAEP(sha256.New(), bytes.NewReader(s), pub,
			[]byte(`{"n":"4242424242424242","m":"08","y":"30","c":"123","t":1795300000000}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "ct1." + k.ID + "." + base64.RawURLEncoding.EncodeToString(ct); got != want {
			t.Errorf("seed %s…: the script's token differs from Go's\n got %s\nwant %s", seed[:8], got, want)
		}
	}
}

// FuzzOpen: whatever a client sends as a token, Open never panics and opens nothing it should not.
func FuzzOpen(f *testing.F) {
	db := storetest.SQLite(f)
	kek, _ := envelope.ParseKEK(envelope.NewKEKText())
	ring, err := envelope.NewKeyring(context.Background(), db, kek, nil)
	if err != nil {
		f.Fatal(err)
	}
	db.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
			VALUES ('a000000001', 'Shop', 'a@example.com', 'a@example.com', 'CAD', 0)`)
		return err
	})
	svc := cardenc.New(cardenc.Config{DB: db, Keyring: ring})
	k, err := svc.Current(context.Background(), "a000000001")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("ct1." + k.ID + "." + strings.Repeat("A", 342))
	f.Add("ct1." + k.ID + ".")
	f.Add("ct1...")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		if _, err := svc.Open(context.Background(), "a000000001", tok); err == nil {
			t.Fatalf("opened a token that no encryption made: %q", tok)
		}
	})
}

// A used token is remembered as long as it could open, even one made an hour ahead of the server's
// clock (the skew Open allows), and forgotten by Purge once it is too old to open.
func TestUsedTokensAreKeptWhileTheyCouldOpen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		k, err := f.svc.Current(ctx, f.m1)
		if err != nil {
			t.Fatal(err)
		}
		made := f.clock.Now().Add(time.Hour - time.Minute)
		tok := goToken(t, k, payload(cardtest.Visa, "12", "2040", "123", made))
		use := func() error {
			c, err := f.svc.Open(ctx, f.m1, tok)
			if err != nil {
				return err
			}
			return db.Write(ctx, func(tx *store.Tx) error { return c.Token.Consume(ctx, tx) })
		}
		purge := func() int {
			if err := f.svc.Purge(ctx); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM used_card_tokens`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if err := use(); err != nil {
			t.Fatalf("first use: %v", err)
		}
		if err := use(); !errors.Is(err, cardenc.ErrInvalidToken) {
			t.Fatalf("second use: %v", err)
		}
		// The last minute in which the token opens: its use is still remembered.
		f.clock.Advance(made.Add(24*time.Hour - time.Minute).Sub(f.clock.Now()))
		if n := purge(); n != 1 {
			t.Fatalf("%d used tokens kept", n)
		}
		if err := use(); !errors.Is(err, cardenc.ErrInvalidToken) {
			t.Fatalf("use on the token's last day: %v", err)
		}
		// Too old to open: forgotten.
		f.clock.Advance(2 * time.Minute)
		if n := purge(); n != 0 {
			t.Fatalf("%d used tokens kept after they expired", n)
		}
		if err := use(); !errors.Is(err, cardenc.ErrInvalidToken) {
			t.Fatalf("use of a token too old: %v", err)
		}
	})
}
