package dashboard

import (
	"fmt"
	"strconv"
	"time"
)

// chart is a bar chart of one value per day (the overview's daily volume, and its approvals against
// declines), drawn on the server as SVG, each with an accessible data table beside it: no script, and
// a page's CSP needs nothing more. Its bars stack the series, each
// segment outlined in the card's colour, so that every segment meets the background or a neighbour
// across a gap and keeps its own 3:1 contrast; the page's table says the same in numbers. The SVG is
// an image to assistive technology (role="img"), named by Title and described by Desc.
type chart struct {
	ID, Title, Desc string
	Bars            []chartBar
	Ticks           []chartTick // the value axis's gridlines
	Labels          []chartTick // the date axis's labels
	Legend          []chartSeries
}

// chartSeries is one stacked series: its name, the CSS class that colours it, and a value per day.
type chartSeries struct {
	Name, Class string
	Values      []int64
}

type chartBar struct {
	X, Y, W, H  int
	Class, Hint string // Hint is the bar's tooltip
}

type chartTick struct {
	X, Y  int
	Label string
}

// The chart's drawing area in viewBox units: the value labels left of plotLeft, the dates below
// plotBottom. At 375 px wide, the 360-unit viewBox draws about as large as it is specified.
const (
	chartWidth, chartHeight = 360, 200
	plotLeft, plotRight     = 52, 352
	plotTop, plotBottom     = 10, 176
)

// newChart lays out series (of equal length, one value per date) as stacked bars, with a value axis of
// about four steps whose labels format makes, and a date label a week apart ending today.
func newChart(id, title, desc string, dates []time.Time, series []chartSeries, format func(int64) string) chart {
	c := chart{ID: id, Title: title, Desc: desc, Legend: series}
	var top int64
	for i := range dates {
		var sum int64
		for _, s := range series {
			sum += s.Values[i]
		}
		top = max(top, sum)
	}
	step := niceStep(top)
	ceil := max(step, (top+step-1)/step*step)
	y := func(v int64) int { return plotBottom - int(v*(plotBottom-plotTop)/ceil) }
	for v := int64(0); v <= ceil; v += step {
		c.Ticks = append(c.Ticks, chartTick{X: plotLeft - 6, Y: y(v), Label: format(v)})
	}
	slot := (plotRight - plotLeft) / len(dates)
	for i, d := range dates {
		x := plotLeft + i*slot + 1
		var base int64
		for _, s := range series {
			v := s.Values[i]
			if v == 0 {
				continue
			}
			top, bottom := y(base+v), y(base)
			c.Bars = append(c.Bars, chartBar{X: x, Y: top, W: slot - 2, H: max(1, bottom-top), Class: s.Class,
				Hint: d.Format("Jan 2") + ": " + s.Name + " " + format(v)})
			base += v
		}
		if (len(dates)-1-i)%7 == 0 {
			c.Labels = append(c.Labels, chartTick{X: x + (slot-2)/2, Y: plotBottom + 16, Label: d.Format("Jan 2")})
		}
	}
	return c
}

// niceStep is a step of 1, 2 or 5 times a power of ten that divides 0..top into at most four steps.
func niceStep(top int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if top <= 4*m*p {
				return m * p
			}
		}
	}
}

// count formats a number of transactions.
func count(n int64) string { return strconv.FormatInt(n, 10) }

// permille formats part of whole as a percentage with one decimal, rounded: "97.5 %"; "—" of nothing.
func permille(part, whole int64) string {
	if whole == 0 {
		return "—"
	}
	pm := (part*1000 + whole/2) / whole
	return fmt.Sprintf("%d.%d %%", pm/10, pm%10)
}
