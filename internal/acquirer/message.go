package acquirer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/moov-io/iso8583"

	"github.com/kassapay/kassa/internal/card"
)

// Message types of the profile.
const (
	mtiAuthorization = "0100"
	mtiFinancial     = "0200" // a sale (processing code 000000) or a refund (200000)
	mtiCapture       = "0220"
	mtiReversal      = "0400"
	mtiNetwork       = "0800"
)

// Processing codes (field 3).
const (
	procPurchase = "000000"
	procRefund   = "200000"
)

// slots numbers the fields the host reads, for request.fields; the others are ignored.
var slots = [129]uint8{2: 1, 3: 2, 4: 3, 7: 4, 11: 5, 12: 6, 13: 7, 14: 8, 22: 9, 24: 10, 25: 11, 37: 12, 41: 13,
	42: 14, 48: 15, 49: 16, 62: 17, 90: 18}

// request is a message received, with the fields the host reads parsed out.
type request struct {
	mti     string
	present uint32      // a bit per slot
	fields  [19]string  // by slot, as received
	pan     card.Number // field 2: never printed, stored or echoed in full
	expiry  card.Expiry // field 14
	amount  int64       // field 4
	cvv2    bool        // field 48 carries CV
	au      string      // field 48's AU
	// problem is the first field that breaks the profile: "field 14: not YYMM". The answer is 30.
	problem string
}

// parse reads m. A field the profile constrains but m breaks is noted in problem; fields the
// profile does not use are ignored.
func parse(m *iso8583.Message) *request {
	r := &request{}
	r.mti, _ = m.GetMTI()
	for id := range present(m) {
		if slots[id] == 0 {
			continue
		}
		v, err := m.GetString(id)
		if err != nil { // not its text: it may quote the field
			r.note(id, "unreadable")
			continue
		}
		r.present |= 1 << slots[id]
		r.fields[slots[id]] = v
	}
	// Field 3 is numeric in Spec87ASCII: "000000" reads as "0".
	if v := r.field(3); r.has(3) && len(v) < 6 {
		r.fields[slots[3]] = strings.Repeat("0", 6-len(v)) + v
	}
	for id, check := range checks {
		if check != nil && r.has(id) {
			if p := check(r, r.field(id)); p != "" {
				r.note(id, p)
			}
		}
	}
	for _, id := range required(r.mti, r.field(3)) {
		if !r.has(id) {
			r.note(id, "missing")
		}
	}
	return r
}

// present yields the numbers of the data fields m carries, by its bitmap.
func present(m *iso8583.Message) func(yield func(int) bool) {
	bitmap := m.Bitmap()
	return func(yield func(int) bool) {
		for id := 2; id <= bitmap.Len(); id++ {
			if bitmap.IsSet(id) && !bitmap.IsBitmapPresenceBit(id) && !yield(id) {
				return
			}
		}
	}
}

func (r *request) note(id int, problem string) {
	if r.problem == "" {
		r.problem = fmt.Sprintf("field %d: %s", id, problem)
	}
}

// field returns field id as received, "" when absent or not read.
func (r *request) field(id int) string { return r.fields[slots[id]] }

// has reports whether field id came, of those the host reads.
func (r *request) has(id int) bool { return slots[id] != 0 && r.present&(1<<slots[id]) != 0 }

// required lists the fields the profile's table of messages requires of a message.
func required(mti, proc string) []int {
	switch {
	case mti == mtiNetwork:
		return requiredNetwork
	case (mti == mtiAuthorization || mti == mtiFinancial) && proc != procRefund:
		return requiredPurchase
	case mti == mtiFinancial, mti == mtiCapture:
		return requiredFollowUp
	case mti == mtiReversal:
		return requiredReversal
	}
	return requiredKey
}

var (
	requiredNetwork  = []int{7, 11, 24}
	requiredPurchase = []int{2, 3, 4, 7, 11, 12, 13, 14, 22, 25, 37, 41, 42, 49, 62}
	requiredFollowUp = []int{3, 4, 7, 11, 37, 41, 42, 49, 62, 90} // a capture or a refund
	requiredReversal = []int{4, 7, 11, 37, 41, 42, 49, 62, 90}
	requiredKey      = []int{7, 11, 41}
)

// checks holds, by field, what the profile says a field's content is; each returns the problem or "".
// Fixed lengths are the spec's business: a field of another length does not unpack.
var checks = [...]func(r *request, v string) string{
	2: func(r *request, v string) string {
		n, err := card.ParseNumber(v)
		if err != nil || !digits(v, len(v)) {
			return "not 12 to 19 digits"
		}
		r.pan = n
		return ""
	},
	3: func(_ *request, v string) string { return digitsOf(v, 6) },
	4: func(r *request, v string) string {
		if v == "" { // twelve zeros unpad to nothing
			return ""
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || !digits(v, len(v)) {
			return "not an amount of 12 digits"
		}
		r.amount = n
		return ""
	},
	7:  func(_ *request, v string) string { return clock(v, "MMDDhhmmss") },
	11: func(_ *request, v string) string { return digitsOf(v, 6) },
	12: func(_ *request, v string) string { return clock(v, "hhmmss") },
	13: func(_ *request, v string) string { return clock(v, "MMDD") },
	14: func(r *request, v string) string {
		if !digits(v, 4) {
			return "not YYMM"
		}
		e, err := card.ParseExpiry(v[2:], v[:2])
		if err != nil {
			return "not YYMM"
		}
		r.expiry = e
		return ""
	},
	22: oneOf("010", "100"),        // keyed, card on file
	24: oneOf("001", "002", "301"), // sign-on, sign-off, echo test
	25: oneOf("59", "08", "02"),    // e-commerce, mail/telephone order, recurring
	48: func(r *request, v string) string {
		for v != "" {
			if len(v) < 4 || !digits(v[2:4], 2) {
				return "not tag-length-value"
			}
			tag, n := v[:2], int(v[2]-'0')*10+int(v[3]-'0')
			if len(v) < 4+n {
				return "tag " + tag + " longer than the field"
			}
			val := v[4 : 4+n]
			switch tag {
			case "CV":
				if (n != 3 && n != 4) || !digits(val, n) {
					return "CV is not 3 or 4 digits"
				}
				r.cvv2 = true
			case "AU":
				if val != "Y" && val != "N" {
					return "AU is not Y or N"
				}
				r.au = val
			}
			v = v[4+n:]
		}
		return ""
	},
	49: func(_ *request, v string) string { return digitsOf(v, 3) },
	62: func(_ *request, v string) string {
		if v == "" {
			return "empty"
		}
		return ""
	},
	90: func(_ *request, v string) string { return digitsOf(v, 42) },
}

func digits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func digitsOf(s string, n int) string {
	if !digits(s, n) {
		return fmt.Sprintf("not %d digits", n)
	}
	return ""
}

func oneOf(values ...string) func(*request, string) string {
	return func(_ *request, v string) string {
		for _, ok := range values {
			if v == ok {
				return ""
			}
		}
		return "not one of " + strings.Join(values, ", ")
	}
}

// limits are the ranges of the parts of a date or time.
var limits = map[string][2]int{"MM": {1, 12}, "DD": {1, 31}, "hh": {0, 23}, "mm": {0, 59}, "ss": {0, 59}}

// clock checks a date or time of the layout made of MM (month), DD, hh, mm and ss.
func clock(v, layout string) string {
	if !digits(v, len(layout)) {
		return "not " + layout
	}
	for i := 0; i < len(layout); i += 2 {
		n := int(v[i]-'0')*10 + int(v[i+1]-'0')
		if lim := limits[layout[i:i+2]]; n < lim[0] || n > lim[1] {
			return "not " + layout
		}
	}
	return ""
}

// echoed are the request's fields an answer keeps: "It echoes fields 11, 37, 41, 42 and 62 of the
// request"; with them, the amount, processing code, currency, transmission time and function code
// that identify what is answered.
var echoed = [129]bool{3: true, 4: true, 7: true, 11: true, 24: true, 37: true, 41: true, 42: true, 49: true, 62: true}

// answer turns the request m into its answer, carrying e's: the MTI plus 10, the echoed fields kept
// and the others dropped, fields 38 and 39 set.
func answer(m *iso8583.Message, e *Entry) error {
	mti, _ := m.GetMTI()
	m.MTI(responseMTI(mti))
	for id := range present(m) {
		if !echoed[id] {
			m.UnsetField(id)
		}
	}
	if e.AuthCode != "" {
		if err := m.Field(38, e.AuthCode); err != nil {
			return err
		}
	}
	return m.Field(39, e.ResponseCode)
}

// responseMTI is the MTI of the answer to a request: "the MTI plus 10" (its message function, the
// third digit, goes from request to response).
func responseMTI(mti string) string {
	if len(mti) != 4 {
		return "0000"
	}
	b := []byte(mti)
	b[2]++
	return string(b)
}

// isRequest reports whether mti's message function (its third digit) is one a host answers: a
// request, an advice, a notification or an instruction, not a response to one.
func isRequest(mti string) bool {
	return len(mti) == 4 && (mti[2]-'0')%2 == 0
}
