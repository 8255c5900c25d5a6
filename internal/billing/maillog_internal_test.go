package billing

import (
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"testing"
)

// A preview keeps no link of any form an e-mail writes one in: in text, in an href (escaped by
// html/template or not), in a subject; what is around a link stays.
func TestPreviewRemovesEveryLink(t *testing.T) {
	t.Parallel()
	const key = "k3yS3cr3t"
	got := preview(Message{
		Subject: "Webhook endpoint disabled: https://hooks.example/" + key,
		Text:    "Pay at http://127.0.0.1:8080/invoice/" + key + "/pay.\nThanks",
		HTML: `<a href="https://kassa.example/dashboard/password?token=` + key + `&amp;x=1">Choose</a> ` +
			`<p>HTTPS://KASSA.EXAMPLE/` + key + `</p><p>https:&#47;&#47;kassa.example/` + key + `</p>`,
	})
	all := got.Subject + got.Text + got.HTML
	if strings.Contains(all, key) || strings.Contains(strings.ToLower(all), "kassa.example") {
		t.Fatalf("the preview keeps a link: %+v", got)
	}
	if got.Subject != "Webhook endpoint disabled: [link removed]" || got.Text != "Pay at [link removed]\nThanks" ||
		!strings.HasPrefix(got.HTML, `<a href="[link removed]">Choose</a> <p>[link removed]</p>`) {
		t.Fatalf("the preview: %+v", got)
	}
}

// A failed attempt is recorded as a short phrase, which names no address nor what the server said.
func TestFailureReasons(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 25}, Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dial, "the mail server could not be reached"},
		{&textproto.Error{Code: 535, Msg: "5.7.8 bad credentials for kassa@10.1.2.3"}, "the mail server refused Kassa's sign-in (SMTP 535)"},
		{&textproto.Error{Code: 550, Msg: "5.1.1 <bob@example.com>: no such user"}, "the mail server refused the message (SMTP 550)"},
		{&textproto.Error{Code: 451, Msg: "try later"}, "the mail server deferred the message (SMTP 451)"},
		{fmt.Errorf("%w: %w", errDoesNotOpen, errors.New("cipher: message authentication failed")), "the message does not open: damaged, or its recipients were changed in the database"},
		{errors.New("EOF from 10.1.2.3"), "the mail server failed"},
	} {
		if got := failureReason(tc.err); got != tc.want {
			t.Errorf("failureReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
