package user_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
	"github.com/kassapay/kassa/internal/user"
)

func newTwoFactor(t *testing.T, db *store.DB) *user.TwoFactor {
	t.Helper()
	return twoFactorUnder(t, db, envelope.NewKEKText())
}

// twoFactorUnder is the two-factor store of a node whose key-encryption key is kekText.
func twoFactorUnder(t *testing.T, db *store.DB, kekText string) *user.TwoFactor {
	t.Helper()
	kek, err := envelope.ParseKEK(kekText)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := envelope.NewKeyring(context.Background(), db, kek, nil)
	if err != nil {
		t.Fatal(err)
	}
	return user.NewTwoFactor(db, ring)
}

// enrol turns two-factor authentication on for u at now and returns its secret and recovery codes.
func enrol(t *testing.T, tf *user.TwoFactor, u user.User, now time.Time) (totp.Secret, []string) {
	t.Helper()
	e, err := tf.Begin(u.Person, now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := totp.ParseSecret(e.Key)
	if err != nil {
		t.Fatal(err)
	}
	codes, err := tf.Confirm(context.Background(), u.Person, e.Token, totp.Code(s, totp.Step(now)), now)
	if err != nil {
		t.Fatal(err)
	}
	return s, codes
}

// TestTwoFactorEnrolment: the offered secret is stored only once a code from it is typed, sealed (the
// database never holds it in clear), and only for the user it was offered to, within EnrolmentTTL;
// the user gets ten distinct recovery codes.
func TestTwoFactorEnrolment(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		tf := newTwoFactor(t, db)
		owner := shop(t, db, "owner@example.com", clk.Now())
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, clk.Now())

		e, err := tf.Begin(owner.Person, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		s, _ := totp.ParseSecret(e.Key)
		if !strings.HasPrefix(e.URI, "otpauth://totp/Kassa:owner@example.com?") || !strings.Contains(string(e.QR), "<svg") {
			t.Fatalf("enrolment %+v", e)
		}
		if st, _ := user.StatusOf(ctx, db.Reader(), owner.ID); st.Enabled {
			t.Fatal("enabled before the first code")
		}
		now := clk.Now()
		if _, err := tf.Confirm(ctx, owner.Person, e.Token, "000000", now); !errors.Is(err, user.ErrBadCode) && totp.Code(s, totp.Step(now)) != "000000" {
			t.Errorf("a wrong first code: %v", err)
		}
		if _, err := tf.Confirm(ctx, clerk.Person, e.Token, totp.Code(s, totp.Step(now)), now); !errors.Is(err, user.ErrEnrolmentExpired) {
			t.Errorf("another user's enrolment: %v", err)
		}
		late := now.Add(user.EnrolmentTTL + time.Second)
		if _, err := tf.Confirm(ctx, owner.Person, e.Token, totp.Code(s, totp.Step(late)), late); !errors.Is(err, user.ErrEnrolmentExpired) {
			t.Errorf("an enrolment after its TTL: %v", err)
		}
		codes, err := tf.Confirm(ctx, owner.Person, e.Token, totp.Code(s, totp.Step(now)), now)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range codes {
			if len(c) != 19 || seen[c] {
				t.Errorf("recovery code %q", c)
			}
			seen[c] = true
		}
		if st, err := user.StatusOf(ctx, db.Reader(), owner.ID); err != nil || !st.Enabled || st.RecoveryCodes != user.RecoveryCodeCount {
			t.Fatalf("status %+v %v", st, err)
		}
		var stored []byte
		if err := db.Reader().QueryRowContext(ctx, `SELECT totp_secret FROM users WHERE id = $1`, owner.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(stored), string(s)) || strings.Contains(string(stored), e.Key) {
			t.Error("the secret is stored in clear")
		}
	})
}

// TestTwoFactorCheck: a code is accepted one step either side and once; an earlier step's code is
// refused after a later one; two requests racing with one code pass once; a recovery code works once,
// typed in any case and spacing; a user without a second factor never passes.
func TestTwoFactorCheck(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		tf := newTwoFactor(t, db)
		owner := shop(t, db, "owner@example.com", clk.Now())
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, clk.Now())
		s, codes := enrol(t, tf, owner, clk.Now())

		clk.Add(2 * totp.Period)
		now := clk.Now()
		step := totp.Step(now)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, step-2), now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("a code two steps old: %v", err)
		}
		if rec, err := tf.Check(ctx, owner.ID, totp.Code(s, step-1), now); err != nil || rec {
			t.Errorf("last step's code: %v %v", rec, err)
		}
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, step-1), now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("the same code again: %v", err)
		}

		clk.Add(totp.Period)
		now = clk.Now()
		code := totp.Code(s, totp.Step(now))
		var wg sync.WaitGroup
		var mu sync.Mutex
		passed := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := tf.Check(ctx, owner.ID, code, now); err == nil {
					mu.Lock()
					passed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if passed != 1 {
			t.Errorf("one code raced by 8 requests passed %d times", passed)
		}
		// The race's failures count, before or after the winner cleared the count: wrong codes lock the
		// user's codes within MaxCodeFailures more attempts, and they work again after CodeLockout.
		locked := false
		for range user.MaxCodeFailures + 1 {
			if _, err := tf.Check(ctx, owner.ID, "000000", now); errors.Is(err, user.ErrCodesLocked) {
				locked = true
				break
			}
		}
		if !locked {
			t.Fatalf("%d wrong codes after the race did not lock the user's codes", user.MaxCodeFailures+1)
		}
		clk.Add(user.CodeLockout)
		now = clk.Now()

		typed := strings.ToLower(strings.ReplaceAll(codes[3], "-", " "))
		if rec, err := tf.Check(ctx, owner.ID, typed, now); err != nil || !rec {
			t.Errorf("a recovery code typed %q: %v %v", typed, rec, err)
		}
		if _, err := tf.Check(ctx, owner.ID, codes[3], now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("a recovery code twice: %v", err)
		}
		if st, _ := user.StatusOf(ctx, db.Reader(), owner.ID); st.RecoveryCodes != user.RecoveryCodeCount-1 {
			t.Errorf("recovery codes left: %d", st.RecoveryCodes)
		}
		if _, err := tf.Check(ctx, clerk.ID, totp.Code(s, totp.Step(now)), now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("a user without a second factor: %v", err)
		}
		if _, err := tf.Check(ctx, clerk.ID, codes[4], now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("another user's recovery code: %v", err)
		}

		// New recovery codes replace the old ones.
		var fresh []string
		if err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			fresh, err = user.NewRecoveryCodes(ctx, tx, owner.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := tf.Check(ctx, owner.ID, codes[5], now); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("an old recovery code after new ones: %v", err)
		}
		if _, err := tf.Check(ctx, owner.ID, fresh[0], now); err != nil {
			t.Errorf("a new recovery code: %v", err)
		}
	})
}

// TestRequireTwoFactor: where the merchant requires two-factor authentication, a user cannot turn it
// off; elsewhere turning it off removes the secret and the recovery codes.
func TestRequireTwoFactor(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		tf := newTwoFactor(t, db)
		owner := shop(t, db, "owner@example.com", clk.Now())
		s, codes := enrol(t, tf, owner, clk.Now())
		set := func(on bool) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error { return user.SetRequireTwoFactor(ctx, tx, owner.MerchantID, on) }); err != nil {
				t.Fatal(err)
			}
		}
		set(true)
		if on, err := user.RequiresTwoFactor(ctx, db.Reader(), owner.MerchantID); !on || err != nil {
			t.Fatalf("required: %v %v", on, err)
		}
		if err := db.Write(ctx, func(tx *store.Tx) error { return user.Disable(ctx, tx, owner.ID) }); !errors.Is(err, user.ErrTwoFactorRequired) {
			t.Errorf("turning it off where required: %v", err)
		}
		set(false)
		if err := db.Write(ctx, func(tx *store.Tx) error { return user.Disable(ctx, tx, owner.ID) }); err != nil {
			t.Fatal(err)
		}
		if st, _ := user.StatusOf(ctx, db.Reader(), owner.ID); st.Enabled || st.RecoveryCodes != 0 {
			t.Errorf("after turning it off: %+v", st)
		}
		clk.Add(totp.Period)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, totp.Step(clk.Now())), clk.Now()); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("a code after turning it off: %v", err)
		}
		if _, err := tf.Check(ctx, owner.ID, codes[0], clk.Now()); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("a recovery code after turning it off: %v", err)
		}
	})
}

// TestWrongCodesLock: MaxCodeFailures wrong codes in a row lock the user's codes, the right one
// included, for CodeLockout; a right code before that clears the count.
func TestWrongCodesLock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		tf := newTwoFactor(t, db)
		owner := shop(t, db, "owner@example.com", clk.Now())
		s, _ := enrol(t, tf, owner, clk.Now())
		wrong := func(now time.Time) string {
			c := totp.Code(s, totp.Step(now))
			return c[:5] + string(rune('0'+(c[5]-'0'+5)%10)) // another digit: never a code of the window
		}
		for i := range user.MaxCodeFailures - 1 {
			if _, err := tf.Check(ctx, owner.ID, wrong(clk.Now()), clk.Now()); !errors.Is(err, user.ErrBadCode) {
				t.Fatalf("wrong code %d: %v", i+1, err)
			}
		}
		clk.Add(totp.Period)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, totp.Step(clk.Now())), clk.Now()); err != nil {
			t.Fatalf("a right code after %d wrong ones: %v", user.MaxCodeFailures-1, err)
		}
		for i := range user.MaxCodeFailures {
			if _, err := tf.Check(ctx, owner.ID, wrong(clk.Now()), clk.Now()); !errors.Is(err, user.ErrBadCode) {
				t.Fatalf("wrong code %d after the count was cleared: %v", i+1, err)
			}
		}
		clk.Add(totp.Period)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, totp.Step(clk.Now())), clk.Now()); !errors.Is(err, user.ErrCodesLocked) {
			t.Fatalf("the right code after %d wrong ones: %v", user.MaxCodeFailures, err)
		}
		clk.Add(user.CodeLockout - time.Second) // the lock began with the attempt above
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, totp.Step(clk.Now())), clk.Now()); !errors.Is(err, user.ErrCodesLocked) {
			t.Fatalf("the right code within the lockout: %v", err)
		}
		clk.Add(2 * time.Second)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(s, totp.Step(clk.Now())), clk.Now()); err != nil {
			t.Fatalf("the right code after the lockout: %v", err)
		}
	})
}

// TestPendingSignIn: the step between password and second factor is sealed to its user and to the
// one step it allows, and expires.
func TestPendingSignIn(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	kek := envelope.NewKEKText()
	tf := twoFactorUnder(t, db, kek)
	now := time.Now()
	v := tf.Pending("a1b2c3d4e5", user.StepCode, now)
	if id, ok := tf.OpenPending(v, user.StepCode, now.Add(user.PendingTTL-time.Second)); !ok || id != "a1b2c3d4e5" {
		t.Errorf("open: %q %v", id, ok)
	}
	if _, ok := tf.OpenPending(v, user.StepEnrol, now); ok {
		t.Error("the code step's value opened the enrolment")
	}
	if _, ok := tf.OpenPending(tf.Pending("a1b2c3d4e5", user.StepEnrol, now), user.StepCode, now); ok {
		t.Error("the enrolment's value opened the code step")
	}
	if _, ok := tf.OpenPending(v, user.StepCode, now.Add(user.PendingTTL+time.Second)); ok {
		t.Error("opened after its TTL")
	}
	if _, ok := tf.OpenPending(v[:len(v)-2]+"AA", user.StepCode, now); ok {
		t.Error("a damaged value opened")
	}
	if _, ok := twoFactorUnder(t, db, kek).OpenPending(v, user.StepCode, now); !ok {
		t.Error("another node of the same database could not open it")
	}
}

// TestFactorIsNeverReplacedImplicitly: a user with a second factor cannot set up another over it
// (Confirm), however the enrolment was obtained; Replace takes a right code of the factor in place (or
// a recovery code) and a right code of the new one, and a wrong new code uses up nothing; the old
// factor and recovery codes stop working, the new ones work. Two set-ups racing over none install one.
func TestFactorIsNeverReplacedImplicitly(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := newClock()
		tf := newTwoFactor(t, db)
		owner := shop(t, db, "owner@example.com", clk.Now())
		old, oldCodes := enrol(t, tf, owner, clk.Now())

		clk.Add(totp.Period)
		e, err := tf.Begin(owner.Person, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := totp.ParseSecret(e.Key)
		now := clk.Now()
		if _, err := tf.Confirm(ctx, owner.Person, e.Token, totp.Code(fresh, totp.Step(now)), now); !errors.Is(err, user.ErrAlreadyEnabled) {
			t.Fatalf("a set-up over a factor in place: %v", err)
		}
		if _, err := tf.Replace(ctx, owner.Person, "", e.Token, totp.Code(fresh, totp.Step(now)), now); !errors.Is(err, user.ErrBadCode) {
			t.Fatalf("a replacement without the current code: %v", err)
		}
		if _, err := tf.Replace(ctx, owner.Person, totp.Code(fresh, totp.Step(now)), e.Token, totp.Code(fresh, totp.Step(now)), now); !errors.Is(err, user.ErrBadCode) &&
			totp.Code(fresh, totp.Step(now)) != totp.Code(old, totp.Step(now)) {
			t.Fatalf("a replacement with the new factor's code as the current one: %v", err)
		}
		current := totp.Code(old, totp.Step(now))
		wrong := totp.Code(fresh, totp.Step(now)+3)
		if _, err := tf.Replace(ctx, owner.Person, current, e.Token, wrong, now); !errors.Is(err, user.ErrBadCode) {
			t.Fatalf("a replacement with a wrong new code: %v", err)
		}
		codes, err := tf.Replace(ctx, owner.Person, current, e.Token, totp.Code(fresh, totp.Step(now)), now)
		if err != nil {
			t.Fatalf("the replacement, with the current code the wrong new code did not use up: %v", err)
		}
		if len(codes) != user.RecoveryCodeCount {
			t.Fatalf("%d recovery codes", len(codes))
		}
		clk.Add(totp.Period)
		if _, err := tf.Check(ctx, owner.ID, totp.Code(old, totp.Step(clk.Now())), clk.Now()); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("the old factor after its replacement: %v", err)
		}
		if _, err := tf.Check(ctx, owner.ID, oldCodes[0], clk.Now()); !errors.Is(err, user.ErrBadCode) {
			t.Errorf("an old recovery code after the replacement: %v", err)
		}
		if _, err := tf.Check(ctx, owner.ID, totp.Code(fresh, totp.Step(clk.Now())), clk.Now()); err != nil {
			t.Errorf("the new factor: %v", err)
		}

		// A recovery code stands for the current factor (the phone is lost), and is used up.
		clk.Add(totp.Period)
		e2, _ := tf.Begin(owner.Person, clk.Now())
		third, _ := totp.ParseSecret(e2.Key)
		if _, err := tf.Replace(ctx, owner.Person, codes[0], e2.Token, totp.Code(third, totp.Step(clk.Now())), clk.Now()); err != nil {
			t.Fatalf("a replacement with a recovery code: %v", err)
		}

		// Over none, two set-ups racing install one secret.
		clerk := addUser(t, db, owner.MerchantID, "clerk@example.com", user.Sales, clk.Now())
		now = clk.Now()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			e, _ := tf.Begin(clerk.Person, now)
			s, _ := totp.ParseSecret(e.Key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = tf.Confirm(ctx, clerk.Person, e.Token, totp.Code(s, totp.Step(now)), now)
			}()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), user.ErrAlreadyEnabled) {
			t.Errorf("two set-ups racing: %v, %v", errs[0], errs[1])
		}
		if _, err := tf.Replace(ctx, addUser(t, db, owner.MerchantID, "none@example.com", user.Sales, now).Person, "123456", e.Token, "123456", now); err == nil {
			t.Error("a replacement for a user without a factor passed")
		}
	})
}

// TestResumeKeepsTheSecret: after a wrong first code the same secret is shown again, under the same
// token, so that the entry scanned into the app keeps working; an expired token resumes nothing.
func TestResumeKeepsTheSecret(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	clk := newClock()
	tf := newTwoFactor(t, db)
	owner := shop(t, db, "owner@example.com", clk.Now())
	e, err := tf.Begin(owner.Person, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	again, err := tf.Resume(owner.Person, e.Token, clk.Now().Add(time.Minute))
	if err != nil || again.Key != e.Key || again.Token != e.Token || again.URI != e.URI {
		t.Fatalf("resumed %+v, %v; want the key %s", again, err, e.Key)
	}
	if _, err := tf.Resume(owner.Person, e.Token, clk.Now().Add(user.EnrolmentTTL+time.Second)); !errors.Is(err, user.ErrEnrolmentExpired) {
		t.Errorf("an expired enrolment resumed: %v", err)
	}
}
