package password

import (
	"errors"
	"strings"
	"testing"
)

func TestHashVerify(t *testing.T) {
	t.Parallel()
	h, err := hash("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$") {
		t.Fatalf("hash %q is not an argon2id PHC string with the expected parameters", h)
	}
	if ok, err := verify(h, "correct horse battery"); err != nil || !ok {
		t.Fatalf("verify(right) = %v, %v", ok, err)
	}
	if ok, err := verify(h, "correct horse batterY"); err != nil || ok {
		t.Fatalf("verify(wrong) = %v, %v", ok, err)
	}
	h2, _ := hash("correct horse battery")
	if h2 == h {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
}

func TestLengthLimits(t *testing.T) {
	t.Parallel()
	if _, err := hash("short"); !errors.Is(err, ErrTooShort) {
		t.Fatalf("short password: %v", err)
	}
	if _, err := hash(strings.Repeat("x", MaxLength+1)); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long password: %v", err)
	}
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]string{
		"empty":      "",
		"bcrypt":     "$2a$10$abcdefghijklmnopqrstuv",
		"bad params": "$argon2id$v=19$m=x,t=3,p=2$c2FsdA$a2V5",
		"bad salt":   "$argon2id$v=19$m=8,t=1,p=1$!!$a2V5",
		"no key":     "$argon2id$v=19$m=8,t=1,p=1$c2FsdA$",
		"zero lanes": "$argon2id$v=19$m=8,t=1,p=0$c2FsdA$a2V5",
	} {
		if ok, err := verify(h, "whatever"); err == nil || ok {
			t.Errorf("%s: Verify = %v, %v; want malformed", name, ok, err)
		}
	}
}

func TestDummyVerifiesNothing(t *testing.T) {
	t.Parallel()
	if ok, err := verify(dummy(), ""); err != nil || ok {
		t.Fatalf("verify(Dummy) = %v, %v", ok, err)
	}
}
