package hostedpage

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/origin"
)

// The appearances a shop's session may ask of its page, so that an embedded form can match the shop:
// always light, always dark, or the customer's system setting.
const (
	AppearanceLight = "light"
	AppearanceDark  = "dark"
	AppearanceAuto  = "auto"
)

// parseAppearance reads a session's appearance (nil when the body has none): light, dark or auto, the
// default.
func parseAppearance(v *string) (string, error) {
	if v == nil {
		return AppearanceAuto, nil
	}
	if !slices.Contains([]string{AppearanceLight, AppearanceDark, AppearanceAuto}, *v) {
		return "", fault.Invalid("appearance", "appearance must be light, dark or auto")
	}
	return *v, nil
}

// maxReturnURL bounds a return_url, as browsers and servers bound the URLs they take.
const maxReturnURL = 2048

// checkReturnURL checks a session's return_url, where the page opened on its own leads back to once
// checkout ends: an absolute https URL, or http on a loopback address for a shop under development,
// without a user name or password. When the merchant has set the origins that may embed its page,
// the return_url must be at one of them: they are the shop's sites, and a page that pays the
// merchant leads only there.
func checkReturnURL(raw string, m merchant.Settings) error {
	if len(raw) > maxReturnURL {
		return fault.Invalid("return_url", "return_url must be at most %d characters", maxReturnURL)
	}
	u, err := url.Parse(raw)
	o, oerr := origin.Of(raw)
	if err != nil || oerr != nil || !u.IsAbs() || u.Opaque != "" {
		return fault.Invalid("return_url", "return_url must be an absolute https URL, such as https://shop.example/orders/1001")
	}
	if u.User != nil {
		return fault.Invalid("return_url", "return_url must not carry a user name or password")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname())) {
		return fault.Invalid("return_url", "return_url must be https (http only on localhost or a loopback address)")
	}
	if len(m.AllowedOrigins) > 0 && !slices.Contains(m.AllowedOrigins, o) {
		return fault.Invalid("return_url", "return_url must be at one of the merchant's allowed origins (%s), not %s",
			strings.Join(m.AllowedOrigins, ", "), o)
	}
	return nil
}

// loopback reports whether host names this machine: localhost or a loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
