// Package report draws a chaos run the way Jepsen's perf checker does:
// latency-raw.png (every operation's latency over time, by outcome) and
// rate.png (completions per second, by outcome), with the nemesis windows
// shaded. It is only linked into the harness, never into linknode.
package report

import (
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/linkraft/linkraft/jepsen/history"
)

// Window is a span of time (seconds since the start) when a fault was in
// force.
type Window struct {
	Start, End float64
	Fault      string
}

// Windows pairs the nemesis's start and stop entries; a fault never healed
// lasts to end.
func Windows(ops []history.Op, end float64) []Window {
	var out []Window
	open := map[string]float64{}
	for _, op := range ops {
		if op.Process != history.NemesisProcess || op.Type != history.OK {
			continue
		}
		t := float64(op.Time) / 1e9
		switch op.F {
		case "start":
			open[op.Workload] = t
		case "stop":
			if s, ok := open[op.Workload]; ok {
				out = append(out, Window{Start: s, End: t, Fault: op.Workload})
				delete(open, op.Workload)
			}
		}
	}
	for f, s := range open {
		out = append(out, Window{Start: s, End: end, Fault: f})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

var typeColors = map[history.Type]color.Color{
	history.OK:   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	history.Fail: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	history.Info: color.RGBA{R: 0xff, G: 0x9f, B: 0x0e, A: 0xff},
}

var faultColors = []color.Color{
	color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0x38},
	color.NRGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0x38},
	color.NRGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0x38},
	color.NRGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0x38},
	color.NRGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0x38},
	color.NRGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0x38},
}

// shade adds the windows as translucent bands from ymin to ymax, one color
// per fault kind, with a legend entry each.
func shade(p *plot.Plot, windows []Window, ymin, ymax float64) error {
	colorOf := map[string]color.Color{}
	for _, w := range windows {
		c, ok := colorOf[w.Fault]
		if !ok {
			c = faultColors[len(colorOf)%len(faultColors)]
			colorOf[w.Fault] = c
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: w.Start, Y: ymin}, {X: w.End, Y: ymin}, {X: w.End, Y: ymax}, {X: w.Start, Y: ymax}})
		if err != nil {
			return err
		}
		poly.Color, poly.LineStyle.Width = c, 0
		p.Add(poly)
		if !ok {
			p.Legend.Add(w.Fault, poly)
		}
	}
	return nil
}

// completions returns, per completed client operation, its completion time
// (s), latency (ms) and type.
type point struct {
	t, ms float64
	typ   history.Type
}

func completions(ops []history.Op) ([]point, error) {
	pairs, err := history.Pairs(ops)
	if err != nil {
		return nil, err
	}
	var out []point
	for _, p := range pairs {
		if p.Completion == nil {
			continue
		}
		ms := float64(p.Completion.Time-p.Invoke.Time) / 1e6
		out = append(out, point{t: float64(p.Invoke.Time) / 1e9, ms: math.Max(ms, 0.01), typ: p.Completion.Type})
	}
	return out, nil
}

// Latency writes latency-raw.png: each operation at its invocation time,
// log-scale latency, colored by outcome.
func Latency(path string, ops []history.Op, windows []Window, title string) error {
	pts, err := completions(ops)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title + " — latency (raw)"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "latency (ms)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	ymin, ymax := 0.1, 1.0
	for _, pt := range pts {
		ymin, ymax = math.Min(ymin, pt.ms), math.Max(ymax, pt.ms)
	}
	ymax *= 1.5
	if err := shade(p, windows, ymin, ymax); err != nil {
		return err
	}
	for _, typ := range []history.Type{history.OK, history.Fail, history.Info} {
		var xys plotter.XYs
		for _, pt := range pts {
			if pt.typ == typ {
				xys = append(xys, plotter.XY{X: pt.t, Y: pt.ms})
			}
		}
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = typeColors[typ]
		s.GlyphStyle.Radius = vg.Points(1.2)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(s)
		p.Legend.Add(string(typ), s)
	}
	p.Y.Min, p.Y.Max = ymin, ymax
	return p.Save(24*vg.Centimeter, 12*vg.Centimeter, path)
}

// Rate writes rate.png: completions per second by outcome.
func Rate(path string, ops []history.Op, windows []Window, title string) error {
	pts, err := completions(ops)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title + " — throughput"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "operations / s"
	p.Legend.Top = true
	buckets := map[history.Type]map[int]float64{}
	last, ymax := 0, 1.0
	for _, pt := range pts {
		if buckets[pt.typ] == nil {
			buckets[pt.typ] = map[int]float64{}
		}
		s := int(pt.t)
		buckets[pt.typ][s]++
		last = max(last, s)
		ymax = math.Max(ymax, buckets[pt.typ][s])
	}
	ymax *= 1.1
	if err := shade(p, windows, 0, ymax); err != nil {
		return err
	}
	for _, typ := range []history.Type{history.OK, history.Fail, history.Info} {
		b := buckets[typ]
		if len(b) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, last+1)
		for s := 0; s <= last; s++ {
			xys = append(xys, plotter.XY{X: float64(s) + 0.5, Y: b[s]})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = typeColors[typ]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(string(typ), l)
	}
	p.Y.Min, p.Y.Max = 0, ymax
	return p.Save(24*vg.Centimeter, 12*vg.Centimeter, path)
}
