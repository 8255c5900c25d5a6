package envelope_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func kek(t *testing.T) *envelope.KEK {
	t.Helper()
	k, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		k := kek(t)
		ring, err := envelope.NewKeyring(ctx, db, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		secret := []byte("-----BEGIN PRIVATE KEY----- not really")
		sealed := ring.Seal(secret, []byte("ctx-1"))
		if bytes.Contains(sealed, secret) {
			t.Fatal("sealed data contains the secret")
		}
		if got, err := ring.Open(sealed, []byte("ctx-1")); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("Open = %q, %v", got, err)
		}
		if _, err := ring.Open(sealed, []byte("ctx-2")); !errors.Is(err, envelope.ErrOpen) {
			t.Fatalf("Open with another context: %v", err)
		}
		damaged := bytes.Clone(sealed)
		damaged[len(damaged)-1] ^= 1
		if _, err := ring.Open(damaged, []byte("ctx-1")); !errors.Is(err, envelope.ErrOpen) {
			t.Fatalf("Open of damaged data: %v", err)
		}
		for _, bad := range [][]byte{nil, {1}, {2, 1, 0}, {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
			if _, err := ring.Open(bad, nil); !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("Open(%x): %v", bad, err)
			}
		}

		// A second keyring with the same KEK opens what the first sealed (another node, a restart).
		again, err := envelope.NewKeyring(ctx, db, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := again.Open(sealed, []byte("ctx-1")); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("second keyring: %q, %v", got, err)
		}
		// Another KEK is refused outright.
		if _, err := envelope.NewKeyring(ctx, db, kek(t), nil); !errors.Is(err, envelope.ErrWrongKEK) {
			t.Fatalf("wrong KEK: %v", err)
		}
		// The data key is stored wrapped, never in clear.
		var wrapped []byte
		db.Reader().QueryRowContext(ctx, "SELECT wrapped FROM data_keys").Scan(&wrapped)
		if len(wrapped) < 32+28 {
			t.Fatalf("stored data key is %d bytes; want it wrapped", len(wrapped))
		}
	})
}

func TestParseKEK(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{7}, 32)
	a, err := envelope.ParseKEK(hex.EncodeToString(raw) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := envelope.ParseKEK(base64.StdEncoding.EncodeToString(raw))
	if err != nil || a.ID != b.ID || len(a.ID) != 16 {
		t.Fatalf("hex and base64 of one key differ: %v %v %v", a.ID, b.ID, err)
	}
	for _, bad := range []string{"", "abcd", hex.EncodeToString(raw[:31]), "zz" + hex.EncodeToString(raw)[2:]} {
		if _, err := envelope.ParseKEK(bad); err == nil {
			t.Errorf("ParseKEK(%q) accepted", bad)
		}
	}
	if envelope.NewKEKText() == envelope.NewKEKText() {
		t.Fatal("NewKEKText is not random")
	}
}

func TestRewrap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		old, next := kek(t), kek(t)
		ring, err := envelope.NewKeyring(ctx, db, old, nil)
		if err != nil {
			t.Fatal(err)
		}
		sealed := ring.Seal([]byte("secret"), nil)
		n, err := envelope.Rewrap(ctx, db, old, next)
		if err != nil || n != 1 {
			t.Fatalf("Rewrap = %d, %v", n, err)
		}
		// The running keyring still opens (it holds the data keys); a new one needs the new KEK.
		if got, err := ring.Open(sealed, nil); err != nil || string(got) != "secret" {
			t.Fatalf("running keyring after rotation: %q %v", got, err)
		}
		if _, err := envelope.NewKeyring(ctx, db, old, nil); !errors.Is(err, envelope.ErrWrongKEK) {
			t.Fatalf("old KEK after rotation: %v", err)
		}
		fresh, err := envelope.NewKeyring(ctx, db, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := fresh.Open(sealed, nil); err != nil || string(got) != "secret" {
			t.Fatalf("new KEK opens: %q %v", got, err)
		}
		// Repeating the rotation changes nothing; a third key is refused.
		if n, err := envelope.Rewrap(ctx, db, old, next); err != nil || n != 0 {
			t.Fatalf("repeated Rewrap = %d, %v", n, err)
		}
		if _, err := envelope.Rewrap(ctx, db, kek(t), kek(t)); !errors.Is(err, envelope.ErrWrongKEK) {
			t.Fatalf("Rewrap from an unrelated key: %v", err)
		}
	})
}

// CheckKEK tells whether a key opens a database's data keys without creating one, as a restore needs.
func TestCheckKEK(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		k := kek(t)
		if n, err := envelope.CheckKEK(ctx, db.Reader(), k); err != nil || n != 0 {
			t.Fatalf("CheckKEK of a database without data keys = %d, %v", n, err)
		}
		if _, err := envelope.NewKeyring(ctx, db, k, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := envelope.CheckKEK(ctx, db.Reader(), k); err != nil || n != 1 {
			t.Fatalf("CheckKEK with the right key = %d, %v", n, err)
		}
		if _, err := envelope.CheckKEK(ctx, db.Reader(), kek(t)); !errors.Is(err, envelope.ErrWrongKEK) {
			t.Fatalf("CheckKEK with another key: %v", err)
		}
		// A data key recorded under the right key's id but sealed under another does not open.
		if _, err := db.Exec(ctx, `UPDATE data_keys SET wrapped = $1`, []byte("damaged")); err != nil {
			t.Fatal(err)
		}
		if _, err := envelope.CheckKEK(ctx, db.Reader(), k); err == nil {
			t.Fatal("CheckKEK opened a damaged data key")
		}
	})
}
