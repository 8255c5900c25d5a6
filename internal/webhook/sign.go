// Package webhook sends events to merchants' servers: the endpoints a merchant registers, their
// signing secrets, and the durable, leased deliveries that carry each event to each endpoint, signed
// by the Standard Webhooks specification (standardwebhooks.com) so that merchants verify them with
// existing libraries.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
)

// secretPrefix starts every signing secret: "whsec_" + base64 of 32 random bytes, as the
// specification writes them.
const secretPrefix = "whsec_"

// NewSecret returns a fresh signing secret.
func NewSecret() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return secretPrefix + base64.StdEncoding.EncodeToString(raw)
}

// secretKey returns the HMAC key of a secret: the bytes its base64 part encodes.
func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, errors.New("webhook: a secret starts with " + secretPrefix)
	}
	return base64.StdEncoding.DecodeString(b64)
}

// Sign returns the webhook-signature header of a message: "v1," + base64 HMAC-SHA256 of
// "id.timestamp.body" under each secret, space-separated ("webhook-signature … may contain multiple
// signatures, delimited by spaces", which is how a rotated secret keeps signing beside its successor).
func Sign(secrets []string, id string, at time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write(strconv.AppendInt(nil, at.Unix(), 10))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}

// secretAAD binds a sealed secret to its endpoint, so that one endpoint's sealed secret copied onto
// another does not open.
func secretAAD(endpointID string) []byte { return []byte("kassa webhook secret\x00" + endpointID) }

// sealSecret seals an endpoint's secret for the webhook_endpoints row.
func sealSecret(ring *envelope.Keyring, endpointID, secret string) []byte {
	return ring.Seal([]byte(secret), secretAAD(endpointID))
}

// openSecret opens what sealSecret sealed.
func openSecret(ring *envelope.Keyring, endpointID string, sealed []byte) (string, error) {
	b, err := ring.Open(sealed, secretAAD(endpointID))
	return string(b), err
}
