package webhook

import (
	"database/sql"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
)

// signingSecrets are the secrets an endpoint's deliveries are signed with at now: its current secret,
// and the one it replaced while that keeps signing ("rotating it keeps the old one signing beside the
// new for 24 hours", issue 18, point 2). sealed and previous are the row's secret and previous_secret.
func signingSecrets(ring *envelope.Keyring, endpointID string, sealed, previous []byte, previousUntil sql.NullInt64, now time.Time) ([]string, error) {
	cur, err := openSecret(ring, endpointID, sealed)
	if err != nil {
		return nil, err
	}
	secrets := []string{cur}
	if previous != nil && previousUntil.Valid && now.UnixMilli() < previousUntil.Int64 {
		old, err := openSecret(ring, endpointID, previous)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, old)
	}
	return secrets, nil
}

// SealSecret seals an endpoint's signing secret as its webhook_endpoints row holds it (secret,
// previous_secret), for the tools and tests that write the row.
func SealSecret(ring *envelope.Keyring, endpointID, secret string) []byte {
	return sealSecret(ring, endpointID, secret)
}
