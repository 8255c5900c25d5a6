package plan_test

import (
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/plan"
)

func TestParseFrequency(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]plan.Frequency{"DAILY": plan.Daily, "weekly": plan.Weekly, "Monthly": plan.Monthly,
		"MOTHLY": plan.Monthly, "QUARTERLY": plan.Quarterly, "ANNUALLY": plan.Annually, "YEARLY": plan.Annually, " yearly ": plan.Annually} {
		if got, ok := plan.ParseFrequency(in); !ok || got != want {
			t.Errorf("ParseFrequency(%q) = %q, %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "HOURLY", "MONTH", "BIWEEKLY"} {
		if _, ok := plan.ParseFrequency(bad); ok {
			t.Errorf("ParseFrequency(%q) accepted", bad)
		}
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	utc := time.UTC
	toronto, err := time.LoadLocation("America/Toronto")
	if err != nil {
		t.Fatal(err)
	}
	at := func(y int, m time.Month, d, h int, loc *time.Location) time.Time {
		return time.Date(y, m, d, h, 30, 0, 0, loc)
	}
	jan31 := at(2027, time.January, 31, 9, utc)
	for _, tc := range []struct {
		name  string
		f     plan.Frequency
		start time.Time
		loc   *time.Location
		want  []time.Time // cycles 0, 1, 2, …
	}{
		{"monthly from Jan 31 clamps and stays anchored", plan.Monthly, jan31, utc, []time.Time{jan31,
			at(2027, time.February, 28, 9, utc), at(2027, time.March, 31, 9, utc), at(2027, time.April, 30, 9, utc),
			at(2027, time.May, 31, 9, utc), at(2027, time.June, 30, 9, utc)}},
		{"monthly from Jan 31 in a leap year", plan.Monthly, at(2028, time.January, 31, 9, utc), utc, []time.Time{
			at(2028, time.January, 31, 9, utc), at(2028, time.February, 29, 9, utc), at(2028, time.March, 31, 9, utc)}},
		{"annually from Feb 29", plan.Annually, at(2028, time.February, 29, 9, utc), utc, []time.Time{
			at(2028, time.February, 29, 9, utc), at(2029, time.February, 28, 9, utc), at(2030, time.February, 28, 9, utc),
			at(2031, time.February, 28, 9, utc), at(2032, time.February, 29, 9, utc)}},
		{"quarterly from Nov 30", plan.Quarterly, at(2027, time.November, 30, 9, utc), utc, []time.Time{
			at(2027, time.November, 30, 9, utc), at(2028, time.February, 29, 9, utc), at(2028, time.May, 30, 9, utc),
			at(2028, time.August, 30, 9, utc)}},
		{"daily across month and year ends", plan.Daily, at(2027, time.December, 30, 9, utc), utc, []time.Time{
			at(2027, time.December, 30, 9, utc), at(2027, time.December, 31, 9, utc), at(2028, time.January, 1, 9, utc)}},
		{"weekly", plan.Weekly, at(2027, time.February, 22, 9, utc), utc, []time.Time{
			at(2027, time.February, 22, 9, utc), at(2027, time.March, 1, 9, utc), at(2027, time.March, 8, 9, utc)}},
		// In the merchant's time zone the wall-clock time holds across the change to daylight time.
		{"daily in Toronto across DST", plan.Daily, at(2027, time.March, 13, 9, toronto), toronto, []time.Time{
			at(2027, time.March, 13, 9, toronto), at(2027, time.March, 14, 9, toronto), at(2027, time.March, 15, 9, toronto)}},
		// A start late in the UTC day is a date of the merchant's own calendar.
		{"monthly on the merchant's calendar", plan.Monthly, time.Date(2027, time.January, 31, 3, 0, 0, 0, utc), toronto, []time.Time{
			time.Date(2027, time.January, 30, 22, 0, 0, 0, toronto), time.Date(2027, time.February, 28, 22, 0, 0, 0, toronto),
			time.Date(2027, time.March, 30, 22, 0, 0, 0, toronto)}},
	} {
		for k, want := range tc.want {
			if got := tc.f.Due(tc.start, k, tc.loc); !got.Equal(want) {
				t.Errorf("%s: cycle %d = %v, want %v", tc.name, k, got, want)
			}
		}
	}
	// Twelve monthly cycles from Jan 31 land on each month's last day, a year on.
	if got := plan.Monthly.Due(jan31, 12, utc); !got.Equal(at(2028, time.January, 31, 9, utc)) {
		t.Fatalf("cycle 12: %v", got)
	}
}
