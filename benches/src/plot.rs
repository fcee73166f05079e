//! Line charts of latency or bandwidth versus message size: log2 x axis (bytes), log10 y axis, one line with point
//! markers per implementation, a legend, rasterised with [`crate::png`].

use crate::png::{text_width, Image, Rgb};
use crate::stats::human_size;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (size in bytes, value) points; non-positive or non-finite values are skipped.
    pub points: Vec<(usize, f64)>,
    /// Draw as a reference (grey) instead of in the next colour.
    pub reference: bool,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title (top).
    pub title: String,
    /// Y axis label, e.g. `latency, us (lower is better)`.
    pub y_label: String,
    /// The lines; the first is drawn last (on top) and thicker.
    pub series: Vec<Series>,
}

const W: usize = 960;
const H: usize = 600;
const LEFT: i64 = 96;
const RIGHT: i64 = 24;
const TOP: i64 = 48;
const BOTTOM: i64 = 64;
const COLORS: [Rgb; 5] = [
    [214, 39, 40],   // red: xpushmem
    [31, 119, 180],  // blue
    [44, 160, 44],   // green
    [255, 127, 14],  // orange
    [148, 103, 189], // purple
];
const REFERENCE: Rgb = [110, 110, 110];

fn fmt_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let digits = (-v.log10()).ceil() as usize;
        format!("{v:.digits$}")
    }
}

impl Chart {
    fn color(&self, i: usize) -> Rgb {
        if self.series[i].reference {
            return REFERENCE;
        }
        let k = self.series[..i].iter().filter(|s| !s.reference).count();
        COLORS[k % COLORS.len()]
    }

    /// Render to an image.
    pub fn render(&self) -> Image {
        let mut img = Image::new(W, H, [255, 255, 255]);
        let pts: Vec<(usize, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|&(x, y)| x > 0 && y.is_finite() && y > 0.0)
            .collect();
        let black = [0, 0, 0];
        let grid = [225, 225, 225];
        img.text(LEFT, 14, &self.title, 2, black);
        if pts.is_empty() {
            img.text(LEFT, H as i64 / 2, "no data", 2, black);
            return img;
        }
        let lx = |x: usize| (x as f64).log2();
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(lx(p.0)), b.max(lx(p.0)))
        });
        if x1 - x0 < 1.0 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let (ymin, ymax) = pts
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let y0 = ymin.log10().floor();
        let mut y1 = ymax.log10().ceil();
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let (pw, ph) = (
            (W as i64 - LEFT - RIGHT) as f64,
            (H as i64 - TOP - BOTTOM) as f64,
        );
        let px = |x: usize| LEFT as f64 + (lx(x) - x0) / (x1 - x0) * pw;
        let py = |y: f64| TOP as f64 + (y1 - y.log10()) / (y1 - y0) * ph;
        // grid and y ticks: decades, with 2 and 5 as light lines
        let mut d = y0;
        while d <= y1 {
            let v = 10f64.powf(d);
            for m in [1.0, 2.0, 5.0] {
                let y = py(v * m);
                if v * m > 10f64.powf(y1) * 1.0001 {
                    break;
                }
                let c = if m == 1.0 { [200, 200, 200] } else { grid };
                img.line(LEFT as f64, y, (W as i64 - RIGHT) as f64, y, 1, c);
                if m == 1.0 {
                    let t = fmt_tick(v);
                    img.text(
                        LEFT - 8 - text_width(&t, 2) as i64,
                        y as i64 - 7,
                        &t,
                        2,
                        black,
                    );
                }
            }
            d += 1.0;
        }
        // x ticks: every power of two, labelled every other (or every fourth on wide ranges)
        let step = if x1 - x0 > 14.0 { 4 } else { 2 };
        let mut e = x0.ceil() as i64;
        while e as f64 <= x1 {
            let x = px(1usize << e);
            img.line(x, TOP as f64, x, (H as i64 - BOTTOM) as f64, 1, grid);
            if (e - x0.ceil() as i64) % step == 0 {
                let t = human_size(1usize << e).replace(' ', "");
                let tw = text_width(&t, 2) as i64;
                img.text(
                    (x as i64 - tw / 2).clamp(0, W as i64 - tw - 2),
                    H as i64 - BOTTOM + 10,
                    &t,
                    2,
                    black,
                );
            }
            e += 1;
        }
        // frame and axis labels
        let (l, r, t, b) = (
            LEFT as f64,
            (W as i64 - RIGHT) as f64,
            TOP as f64,
            (H as i64 - BOTTOM) as f64,
        );
        for (a, bb, c, dd) in [(l, t, r, t), (l, b, r, b), (l, t, l, b), (r, t, r, b)] {
            img.line(a, bb, c, dd, 1, black);
        }
        let xl = "message size (bytes)";
        img.text(
            (W as i64 - text_width(xl, 2) as i64) / 2,
            H as i64 - 26,
            xl,
            2,
            black,
        );
        img.text_up(
            12,
            TOP + ph as i64 / 2 + text_width(&self.y_label, 2) as i64 / 2,
            &self.y_label,
            2,
            black,
        );
        // lines, the first series on top
        for (i, s) in self.series.iter().enumerate().rev() {
            let c = self.color(i);
            let width = if i == 0 { 3 } else { 2 };
            let mut p: Vec<(usize, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x > 0 && y.is_finite() && y > 0.0)
                .collect();
            p.sort_by_key(|q| q.0);
            for w in p.windows(2) {
                img.line(px(w[0].0), py(w[0].1), px(w[1].0), py(w[1].1), width, c);
            }
            for q in &p {
                let (x, y) = (px(q.0) as i64, py(q.1) as i64);
                img.rect(x - 3, y - 3, x + 4, y + 4, c);
            }
        }
        // legend (top left inside the frame)
        let lw = self
            .series
            .iter()
            .map(|s| text_width(&s.label, 2))
            .max()
            .unwrap_or(0) as i64
            + 48;
        let lh = self.series.len() as i64 * 20 + 8;
        let (lx0, ly0) = (LEFT + 10, TOP + 10);
        img.rect(lx0, ly0, lx0 + lw, ly0 + lh, [255, 255, 255]);
        for (i, s) in self.series.iter().enumerate() {
            let c = self.color(i);
            let y = ly0 + 8 + i as i64 * 20;
            img.rect(lx0 + 6, y + 4, lx0 + 34, y + 9, c);
            img.text(lx0 + 40, y, &s.label, 2, [0, 0, 0]);
        }
        for (a, bb, c, dd) in [
            (lx0, ly0, lx0 + lw, ly0),
            (lx0, ly0 + lh, lx0 + lw, ly0 + lh),
            (lx0, ly0, lx0, ly0 + lh),
            (lx0 + lw, ly0, lx0 + lw, ly0 + lh),
        ] {
            img.line(a as f64, bb as f64, c as f64, dd as f64, 1, [150, 150, 150]);
        }
        img
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lines_and_empty_charts() {
        let c = Chart {
            title: "put bandwidth".into(),
            y_label: "GB/s".into(),
            series: vec![
                Series {
                    label: "xpushmem".into(),
                    points: vec![(8, 0.5), (1024, 20.0), (1 << 20, 30.0)],
                    reference: false,
                },
                Series {
                    label: "oshmem".into(),
                    points: vec![(8, 0.4), (1024, 15.0), (1 << 20, 25.0), (2048, f64::NAN)],
                    reference: true,
                },
            ],
        };
        let img = c.render();
        let red = (0..img.h)
            .flat_map(|y| (0..img.w).map(move |x| (x, y)))
            .filter(|&(x, y)| img.get(x, y) == Some(COLORS[0]))
            .count();
        assert!(red > 500, "xpushmem line drawn ({red} px)");
        assert!(img.to_png().len() > 1000);
        let empty = Chart {
            series: vec![],
            ..c
        };
        assert_eq!(empty.render().w, W);
        assert_eq!(fmt_tick(0.01), "0.01");
        assert_eq!(fmt_tick(100.0), "100");
    }
}
