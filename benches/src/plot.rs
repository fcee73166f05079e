//! Line charts of latency or bandwidth versus message size, drawn with `plotters` (bitmap backend, PNG): log2 x
//! axis (bytes), log10 y axis, one line with point markers per implementation, references dashed in grey, a
//! legend. Text is set in a TrueType font read from the system (DejaVu Sans, package `fonts-dejavu-core`, which
//! `scripts/setup.sh` installs; `XPUSHMEM_PERF_FONT` names another file).

use crate::error::{PerfError, Result};
use crate::stats::human_size;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::Path;
use std::sync::OnceLock;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (size in bytes, value) points; non-positive or non-finite values are skipped.
    pub points: Vec<(usize, f64)>,
    /// Draw as a reference (grey, dashed) instead of in the next colour.
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

/// Image size in pixels.
pub const SIZE: (u32, u32) = (1024, 640);
const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),   // red: xpushmem
    RGBColor(31, 119, 180),  // blue
    RGBColor(44, 160, 44),   // green
    RGBColor(255, 127, 14),  // orange
    RGBColor(148, 103, 189), // purple
];
const REFERENCE: RGBColor = RGBColor(110, 110, 110);

/// Where the font is looked for (the first that exists), after `XPUSHMEM_PERF_FONT`.
const FONT_FILES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
];

/// Register the TrueType font with plotters once per process (its text renderer needs the bytes for the whole
/// run); the error says which files were tried.
fn font() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let env = std::env::var("XPUSHMEM_PERF_FONT").ok();
            let tried: Vec<String> = env
                .into_iter()
                .chain(FONT_FILES.iter().map(|s| s.to_string()))
                .collect();
            let (path, bytes) = tried
                .iter()
                .find_map(|p| std::fs::read(p).ok().map(|b| (p.clone(), b)))
                .ok_or_else(|| {
                    format!(
                        "no TrueType font for the charts: tried {} (install fonts-dejavu-core, or set XPUSHMEM_PERF_FONT)",
                        tried.join(", ")
                    )
                })?;
            // The renderer keeps the font for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            for style in [FontStyle::Normal, FontStyle::Bold] {
                register_font(FONT, style, bytes)
                    .map_err(|_| format!("{path} is not a usable TrueType font"))?;
            }
            Ok(())
        })
        .clone()
        .map_err(PerfError::Usage)
}

/// A tick label of the y axis.
fn fmt_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let digits = (-v.log10()).ceil().max(0.0) as usize;
        format!("{v:.digits$}")
    }
}

fn draw_err(path: &Path, e: impl std::fmt::Display) -> PerfError {
    PerfError::io(path, std::io::Error::other(e.to_string()))
}

impl Chart {
    fn color(&self, i: usize) -> RGBColor {
        if self.series[i].reference {
            return REFERENCE;
        }
        let k = self.series[..i].iter().filter(|s| !s.reference).count();
        COLORS[k % COLORS.len()]
    }

    /// The points of series `i` that a log-log chart can show, by size.
    fn points(&self, i: usize) -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = self.series[i]
            .points
            .iter()
            .filter(|&&(x, y)| x > 0 && y.is_finite() && y > 0.0)
            .map(|&(x, y)| (x as f64, y))
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        p
    }

    /// Draw the chart into a PNG file at `path`.
    pub fn write_png(&self, path: &Path) -> Result<()> {
        font()?;
        let root = BitMapBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(path, e))?;
        let all: Vec<(f64, f64)> = (0..self.series.len())
            .flat_map(|i| self.points(i))
            .collect();
        if all.is_empty() {
            root.draw(&Text::new(
                format!("{}: no data", self.title),
                (40, SIZE.1 as i32 / 2),
                (FONT, 22).into_font(),
            ))
            .map_err(|e| draw_err(path, e))?;
            return root.present().map_err(|e| draw_err(path, e));
        }
        let (xmin, xmax) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let (ymin, ymax) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let (x0, x1) = if xmax / xmin < 2.0 {
            (xmin / 2.0, xmax * 2.0)
        } else {
            (xmin, xmax)
        };
        let y0 = 10f64.powf(ymin.log10().floor());
        let mut y1 = 10f64.powf(ymax.log10().ceil());
        if y1 <= y0 {
            y1 = y0 * 10.0;
        }
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, (FONT, 26).into_font().style(FontStyle::Bold))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale().base(2.0), (y0..y1).log_scale())
            .map_err(|e| draw_err(path, e))?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes)")
            .y_desc(&self.y_label)
            .axis_desc_style((FONT, 20))
            .label_style((FONT, 17))
            .x_label_formatter(&|x| human_size(x.round() as usize).replace(' ', ""))
            .y_label_formatter(&|y| fmt_tick(*y))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(205, 205, 205))
            .draw()
            .map_err(|e| draw_err(path, e))?;
        // Every series in order (the legend keeps it), then the first one (xpushmem) again, on top.
        let n = self.series.len();
        for k in 0..=n {
            let i = k % n;
            let pts = self.points(i);
            if pts.is_empty() || (k == n && self.series[i].reference) {
                continue;
            }
            let c = self.color(i);
            let width = if i == 0 { 3 } else { 2 };
            let style = c.stroke_width(width);
            let anno = if self.series[i].reference {
                chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 8, 5, style))
            } else {
                chart.draw_series(LineSeries::new(pts.iter().copied(), style))
            }
            .map_err(|e| draw_err(path, e))?;
            if k < n {
                anno.label(self.series[i].label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 28, y)], c.stroke_width(width))
                    });
            }
            chart
                .draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, if i == 0 { 4 } else { 3 }, c.filled())),
                )
                .map_err(|e| draw_err(path, e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(150, 150, 150))
            .label_font((FONT, 18))
            .draw()
            .map_err(|e| draw_err(path, e))?;
        root.present().map_err(|e| draw_err(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_series_and_empty_charts() {
        let dir = std::env::temp_dir().join(format!("xpushmem-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = Chart {
            title: "put bandwidth - 2 PEs".into(),
            y_label: "GB/s (higher is better)".into(),
            series: vec![
                Series {
                    label: "xpushmem".into(),
                    points: vec![(8, 0.5), (1024, 20.0), (1 << 20, 30.0)],
                    reference: false,
                },
                Series {
                    label: "memcpy (reference)".into(),
                    points: vec![(8, 0.4), (1024, 15.0), (1 << 20, 25.0), (2048, f64::NAN)],
                    reference: true,
                },
            ],
        };
        let f = dir.join("chart.png");
        c.write_png(&f).unwrap();
        let png = std::fs::read(&f).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // The image is SIZE (IHDR width and height) and has xpushmem's red in it.
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), SIZE.0);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), SIZE.1);
        let empty = Chart {
            series: vec![],
            ..c
        };
        empty.write_png(&dir.join("empty.png")).unwrap();
        assert_eq!(fmt_tick(0.01), "0.01");
        assert_eq!(fmt_tick(100.0), "100");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
