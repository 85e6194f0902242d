//! Plots of runs: the eval metric against samples for each run, with the target line, and
//! (when the logs have `tracked_stats` `train_step_time`) the step-time distribution of each
//! run as a box plot.
//!
//! The figure is laid out once as a list of shapes and written either as SVG (by hand, no
//! dependency) or, with the `plot` feature, rasterised to PNG (8x8 bitmap font for the text).
//! In the SVG the target line has `id="target"` and each run's curve has
//! `class="run"` and `data-run="<path>"`.

use mllog_core::results::summary::{RunSummary, TargetLine};

/// An RGB colour.
pub type Rgb = [u8; 3];

/// The colour of run `i` (Tableau 10).
pub fn run_color(i: usize) -> Rgb {
    const P: [Rgb; 10] = [
        [31, 119, 180],
        [255, 127, 14],
        [44, 160, 44],
        [148, 103, 189],
        [140, 86, 75],
        [227, 119, 194],
        [127, 127, 127],
        [188, 189, 34],
        [23, 190, 207],
        [57, 59, 121],
    ];
    P[i % P.len()]
}

/// The colour of the target line.
pub const TARGET_COLOR: Rgb = [214, 39, 40];
const AXIS: Rgb = [40, 40, 40];
const GRID: Rgb = [225, 225, 225];
const TEXT: Rgb = [20, 20, 20];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Anchor {
    Start,
    Middle,
    End,
}

#[derive(Clone, Debug, PartialEq)]
enum Shape {
    Line {
        a: (f64, f64),
        b: (f64, f64),
        color: Rgb,
        width: f64,
        dash: bool,
        id: Option<&'static str>,
    },
    Polyline {
        pts: Vec<(f64, f64)>,
        color: Rgb,
        width: f64,
        run: String,
    },
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: Option<Rgb>,
        stroke: Option<Rgb>,
    },
    Circle {
        c: (f64, f64),
        r: f64,
        color: Rgb,
    },
    Text {
        p: (f64, f64),
        text: String,
        size: f64,
        color: Rgb,
        anchor: Anchor,
        vertical: bool,
        bold: bool,
    },
}

/// A laid-out figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    shapes: Vec<Shape>,
}

/// "Nice" tick positions covering `[lo, hi]`.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut v = Vec::new();
    let mut x = first;
    while x <= hi + step * 1e-9 && v.len() < 50 {
        v.push(if x.abs() < step * 1e-9 { 0.0 } else { x });
        x += step;
    }
    v
}

fn fmt_tick(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        let s = format!("{:.2}M", x / 1e6);
        s.replace(".00M", "M")
    } else if a >= 1e4 {
        let s = format!("{:.1}k", x / 1e3);
        s.replace(".0k", "k")
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn short(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    if base.chars().count() > 22 {
        let tail: String = base.chars().rev().take(21).collect();
        format!("…{}", tail.chars().rev().collect::<String>())
    } else {
        base.to_string()
    }
}

struct Frame {
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
    xlo: f64,
    xhi: f64,
    ylo: f64,
    yhi: f64,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        self.x0 + (x - self.xlo) / (self.xhi - self.xlo) * self.w
    }
    fn py(&self, y: f64) -> f64 {
        self.y0 + self.h - (y - self.ylo) / (self.yhi - self.ylo) * self.h
    }
}

fn text(p: (f64, f64), s: impl Into<String>, size: f64, anchor: Anchor) -> Shape {
    Shape::Text {
        p,
        text: s.into(),
        size,
        color: TEXT,
        anchor,
        vertical: false,
        bold: false,
    }
}

fn axes(shapes: &mut Vec<Shape>, f: &Frame, xt: &[f64], yt: &[f64], xlabel: &str, ylabel: &str) {
    for &t in yt {
        let y = f.py(t);
        shapes.push(Shape::Line {
            a: (f.x0, y),
            b: (f.x0 + f.w, y),
            color: GRID,
            width: 1.0,
            dash: false,
            id: None,
        });
        shapes.push(text((f.x0 - 6.0, y + 4.0), fmt_tick(t), 12.0, Anchor::End));
    }
    for &t in xt {
        let x = f.px(t);
        shapes.push(Shape::Line {
            a: (x, f.y0),
            b: (x, f.y0 + f.h),
            color: GRID,
            width: 1.0,
            dash: false,
            id: None,
        });
        shapes.push(text(
            (x, f.y0 + f.h + 16.0),
            fmt_tick(t),
            12.0,
            Anchor::Middle,
        ));
    }
    shapes.push(Shape::Rect {
        x: f.x0,
        y: f.y0,
        w: f.w,
        h: f.h,
        fill: None,
        stroke: Some(AXIS),
    });
    shapes.push(text(
        (f.x0 + f.w / 2.0, f.y0 + f.h + 36.0),
        xlabel,
        13.0,
        Anchor::Middle,
    ));
    shapes.push(Shape::Text {
        p: (f.x0 - 58.0, f.y0 + f.h / 2.0),
        text: ylabel.into(),
        size: 13.0,
        color: TEXT,
        anchor: Anchor::Middle,
        vertical: true,
        bold: false,
    });
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let i = pos.floor() as usize;
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] + (sorted[j] - sorted[i]) * (pos - i as f64)
}

/// Lays out the figure for `runs`.
pub fn figure(runs: &[RunSummary]) -> Figure {
    let width = 1100.0;
    let eval_h = 420.0;
    let legend_w = 380.0;
    let with_steps = runs.iter().any(|r| !r.step_times_s.is_empty());
    let step_rows = runs.iter().filter(|r| !r.step_times_s.is_empty()).count();
    let step_h = if with_steps {
        (step_rows as f64 * 26.0).clamp(120.0, 400.0)
    } else {
        0.0
    };
    let height = 60.0 + eval_h + 70.0 + if with_steps { step_h + 110.0 } else { 0.0 };
    let mut shapes = vec![Shape::Rect {
        x: 0.0,
        y: 0.0,
        w: width,
        h: height,
        fill: Some([255, 255, 255]),
        stroke: None,
    }];
    let bench: Vec<&str> = {
        let mut b: Vec<&str> = runs.iter().filter_map(|r| r.benchmark.as_deref()).collect();
        b.dedup();
        b
    };
    // One target line per benchmark (a plot of several benchmarks gets several).
    let mut targets: Vec<(String, TargetLine)> = Vec::new();
    for r in runs {
        if let Some(t) = &r.target {
            let b = r.benchmark.clone().unwrap_or_default();
            if !targets.iter().any(|(n, _)| *n == b) {
                targets.push((b, t.clone()));
            }
        }
    }
    let tgt = targets.first().map(|(_, t)| t.clone());
    let key = tgt
        .as_ref()
        .map_or("eval_accuracy", |t| t.key.as_str())
        .to_string();
    let unit = runs.first().map_or("samples", |r| r.x_unit);
    shapes.push(Shape::Text {
        p: (20.0, 30.0),
        text: format!(
            "{}: {} vs {} ({} run{})",
            if bench.is_empty() {
                "MLLOG".to_string()
            } else {
                bench.join(", ")
            },
            key,
            unit,
            runs.len(),
            if runs.len() == 1 { "" } else { "s" }
        ),
        size: 16.0,
        color: TEXT,
        anchor: Anchor::Start,
        vertical: false,
        bold: true,
    });
    // Eval panel.
    let mut xs = vec![];
    let mut ys = vec![];
    for r in runs {
        for (i, e) in r.evals.iter().enumerate() {
            xs.push(e.x.unwrap_or(i as f64 + 1.0));
            ys.push(e.value);
        }
    }
    for (_, t) in &targets {
        ys.push(t.value);
    }
    let (mut xlo, mut xhi) = (0.0f64, xs.iter().copied().fold(1.0, f64::max));
    if xs.iter().any(|&x| x < 0.0) {
        xlo = xs.iter().copied().fold(0.0, f64::min);
    }
    if xhi <= xlo {
        xhi = xlo + 1.0;
    }
    let (mut ylo, mut yhi) = (
        ys.iter().copied().fold(f64::INFINITY, f64::min),
        ys.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    if !ylo.is_finite() || !yhi.is_finite() {
        (ylo, yhi) = (0.0, 1.0);
    }
    let pad = ((yhi - ylo) * 0.08).max(1e-6);
    ylo -= pad;
    yhi += pad;
    let xt = ticks(xlo, xhi, 6);
    let yt = ticks(ylo, yhi, 6);
    let f = Frame {
        x0: 80.0,
        y0: 60.0,
        w: width - 80.0 - legend_w,
        h: eval_h,
        xlo,
        xhi,
        ylo,
        yhi,
    };
    axes(&mut shapes, &f, &xt, &yt, unit, &key);
    for (k, (bench, t)) in targets.iter().enumerate() {
        let y = f.py(t.value);
        shapes.push(Shape::Line {
            a: (f.x0, y),
            b: (f.x0 + f.w, y),
            color: TARGET_COLOR,
            width: 2.0,
            dash: true,
            id: if k == 0 { Some("target") } else { None },
        });
        shapes.push(Shape::Text {
            p: (f.x0 + f.w - 4.0, y - 6.0),
            text: format!(
                "{}target {} {}",
                if targets.len() > 1 {
                    format!("{bench} ")
                } else {
                    String::new()
                },
                if t.higher_is_better { ">=" } else { "<=" },
                t.value
            ),
            size: 12.0,
            color: TARGET_COLOR,
            anchor: Anchor::End,
            vertical: false,
            bold: true,
        });
    }
    for (i, r) in runs.iter().enumerate() {
        let color = run_color(i);
        let pts: Vec<(f64, f64)> = r
            .evals
            .iter()
            .enumerate()
            .map(|(k, e)| (f.px(e.x.unwrap_or(k as f64 + 1.0)), f.py(e.value)))
            .collect();
        for &p in &pts {
            shapes.push(Shape::Circle {
                c: p,
                r: 3.0,
                color,
            });
        }
        shapes.push(Shape::Polyline {
            pts,
            color,
            width: 2.0,
            run: r.path.clone(),
        });
    }
    // Legend.
    let lx = f.x0 + f.w + 24.0;
    let mut ly = f.y0 + 8.0;
    if tgt.is_some() {
        shapes.push(Shape::Line {
            a: (lx, ly),
            b: (lx + 24.0, ly),
            color: TARGET_COLOR,
            width: 2.0,
            dash: true,
            id: None,
        });
        shapes.push(text((lx + 32.0, ly + 4.0), "target", 12.0, Anchor::Start));
        ly += 20.0;
    }
    for (i, r) in runs.iter().enumerate() {
        if ly > f.y0 + f.h + 40.0 {
            shapes.push(text(
                (lx, ly + 4.0),
                format!("... and {} more", runs.len() - i),
                12.0,
                Anchor::Start,
            ));
            break;
        }
        shapes.push(Shape::Line {
            a: (lx, ly),
            b: (lx + 24.0, ly),
            color: run_color(i),
            width: 3.0,
            dash: false,
            id: None,
        });
        let status = match (r.converged, r.time_to_train_min) {
            (true, Some(m)) => format!("{m:.1} min"),
            (false, _) => r.status.clone().unwrap_or_else(|| "no run_stop".into()),
            (true, None) => "converged".into(),
        };
        shapes.push(text(
            (lx + 32.0, ly + 4.0),
            format!("{} ({status})", short(&r.path)),
            12.0,
            Anchor::Start,
        ));
        ly += 20.0;
    }
    // Step-time panel: one box plot per run (whiskers 5th-95th percentile).
    if with_steps {
        let rows: Vec<(usize, Vec<f64>)> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.step_times_s.is_empty())
            .map(|(i, r)| {
                let mut v: Vec<f64> = r
                    .step_times_s
                    .iter()
                    .copied()
                    .filter(|x| x.is_finite())
                    .collect();
                v.sort_by(f64::total_cmp);
                (i, v)
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let lo = rows
            .iter()
            .map(|(_, v)| quantile(v, 0.05))
            .fold(f64::INFINITY, f64::min);
        let hi = rows
            .iter()
            .map(|(_, v)| quantile(v, 0.95))
            .fold(0.0, f64::max);
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else {
            (lo - 0.5, lo + 0.5)
        };
        let pad = (hi - lo) * 0.08;
        let g = Frame {
            x0: 80.0,
            y0: 60.0 + eval_h + 100.0,
            w: width - 80.0 - legend_w,
            h: step_h,
            xlo: (lo - pad).max(0.0),
            xhi: hi + pad,
            ylo: 0.0,
            yhi: rows.len() as f64,
        };
        shapes.push(Shape::Text {
            p: (20.0, g.y0 - 16.0),
            text:
                "train step time per run (box: quartiles and median; whiskers: 5th-95th percentile)"
                    .into(),
            size: 14.0,
            color: TEXT,
            anchor: Anchor::Start,
            vertical: false,
            bold: true,
        });
        let xt = ticks(g.xlo, g.xhi, 6);
        axes(&mut shapes, &g, &xt, &[], "seconds per step", "");
        let row_h = g.h / rows.len().max(1) as f64;
        for (k, (i, v)) in rows.iter().enumerate() {
            let color = run_color(*i);
            let cy = g.y0 + row_h * (k as f64 + 0.5);
            let bh = (row_h * 0.6).min(18.0);
            let q = |p| g.px(quantile(v, p).clamp(g.xlo, g.xhi));
            shapes.push(Shape::Line {
                a: (q(0.05), cy),
                b: (q(0.95), cy),
                color,
                width: 1.5,
                dash: false,
                id: None,
            });
            shapes.push(Shape::Rect {
                x: q(0.25),
                y: cy - bh / 2.0,
                w: (q(0.75) - q(0.25)).max(1.0),
                h: bh,
                fill: Some(color),
                stroke: Some(AXIS),
            });
            shapes.push(Shape::Line {
                a: (q(0.5), cy - bh / 2.0),
                b: (q(0.5), cy + bh / 2.0),
                color: [255, 255, 255],
                width: 2.0,
                dash: false,
                id: None,
            });
            shapes.push(text(
                (g.x0 + g.w + 12.0, cy + 4.0),
                format!("{}: {:.4} s", short(&runs[*i].path), quantile(v, 0.5)),
                12.0,
                Anchor::Start,
            ));
        }
    }
    Figure {
        width: width as u32,
        height: height.ceil() as u32,
        shapes,
    }
}

fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Figure {
    /// The SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
             width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
             font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
            w = self.width,
            h = self.height
        );
        for s in &self.shapes {
            match s {
                Shape::Line {
                    a,
                    b,
                    color,
                    width,
                    dash,
                    id,
                } => {
                    out.push_str(&format!(
                        "<line{} x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" \
                         stroke-width=\"{}\"{}/>\n",
                        id.map_or(String::new(), |i| format!(" id=\"{i}\"")),
                        a.0,
                        a.1,
                        b.0,
                        b.1,
                        hex(*color),
                        width,
                        if *dash { " stroke-dasharray=\"8 5\"" } else { "" }
                    ));
                }
                Shape::Polyline {
                    pts,
                    color,
                    width,
                    run,
                } => {
                    let p: Vec<String> =
                        pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                    out.push_str(&format!(
                        "<polyline class=\"run\" data-run=\"{}\" points=\"{}\" fill=\"none\" \
                         stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\"><title>{}</title></polyline>\n",
                        xml_escape(run),
                        p.join(" "),
                        hex(*color),
                        width,
                        xml_escape(run)
                    ));
                }
                Shape::Rect {
                    x,
                    y,
                    w,
                    h,
                    fill,
                    stroke,
                } => {
                    out.push_str(&format!(
                        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" \
                         fill=\"{}\" stroke=\"{}\"/>\n",
                        fill.map_or("none".into(), hex),
                        stroke.map_or("none".into(), hex)
                    ));
                }
                Shape::Circle { c, r, color } => {
                    out.push_str(&format!(
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{}\"/>\n",
                        c.0,
                        c.1,
                        hex(*color)
                    ));
                }
                Shape::Text {
                    p,
                    text,
                    size,
                    color,
                    anchor,
                    vertical,
                    bold,
                } => {
                    let anchor = match anchor {
                        Anchor::Start => "start",
                        Anchor::Middle => "middle",
                        Anchor::End => "end",
                    };
                    let rot = if *vertical {
                        format!(" transform=\"rotate(-90 {:.1} {:.1})\"", p.0, p.1)
                    } else {
                        String::new()
                    };
                    out.push_str(&format!(
                        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{size}\" fill=\"{}\" \
                         text-anchor=\"{anchor}\"{}{rot}>{}</text>\n",
                        p.0,
                        p.1,
                        hex(*color),
                        if *bold { " font-weight=\"bold\"" } else { "" },
                        xml_escape(text)
                    ));
                }
            }
        }
        out.push_str("</svg>\n");
        out
    }

    /// The figure rasterised as RGB pixels (row-major, 3 bytes a pixel).
    #[cfg(feature = "plot")]
    pub fn to_rgb(&self) -> Vec<u8> {
        raster::render(self)
    }

    /// The PNG file (RGB, 8 bits).
    #[cfg(feature = "plot")]
    pub fn to_png(&self) -> std::io::Result<Vec<u8>> {
        let rgb = self.to_rgb();
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.width, self.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(std::io::Error::other)?;
            w.write_image_data(&rgb).map_err(std::io::Error::other)?;
        }
        Ok(out)
    }
}

/// The file extensions [`write_plot`] writes.
pub const PLOT_EXTENSIONS: [&str; 2] = ["svg", "png"];

/// Writes the plot of `runs` to `path`: SVG for `.svg`, PNG for `.png` (needs the `plot`
/// feature); any other extension is an `InvalidInput` error, so that `out.jpg` never holds SVG.
pub fn write_plot(runs: &[RunSummary], path: &std::path::Path) -> std::io::Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !PLOT_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("unsupported plot format {ext:?}: the file name must end in .svg or .png"),
        ));
    }
    let fig = figure(runs);
    let is_png = ext.eq_ignore_ascii_case("png");
    let bytes = if is_png {
        #[cfg(feature = "plot")]
        {
            fig.to_png()?
        }
        #[cfg(not(feature = "plot"))]
        {
            return Err(std::io::Error::other("PNG output needs the `plot` feature"));
        }
    } else {
        fig.to_svg().into_bytes()
    };
    std::fs::write(path, bytes)
}

#[cfg(feature = "plot")]
mod raster {
    use super::{Anchor, Figure, Rgb, Shape};
    use font8x8::UnicodeFonts;

    struct Canvas {
        w: i64,
        h: i64,
        px: Vec<u8>,
    }

    impl Canvas {
        fn put(&mut self, x: i64, y: i64, c: Rgb) {
            if x >= 0 && y >= 0 && x < self.w && y < self.h {
                let i = ((y * self.w + x) * 3) as usize;
                self.px[i..i + 3].copy_from_slice(&c);
            }
        }
        fn dot(&mut self, x: f64, y: f64, r: f64, c: Rgb) {
            let r = r.max(0.5);
            let (x0, x1) = ((x - r).floor() as i64, (x + r).ceil() as i64);
            let (y0, y1) = ((y - r).floor() as i64, (y + r).ceil() as i64);
            for yy in y0..=y1 {
                for xx in x0..=x1 {
                    let (dx, dy) = (xx as f64 + 0.5 - x, yy as f64 + 0.5 - y);
                    if dx * dx + dy * dy <= r * r {
                        self.put(xx, yy, c);
                    }
                }
            }
        }
        fn line(&mut self, a: (f64, f64), b: (f64, f64), c: Rgb, width: f64, dash: bool) {
            let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
            let n = (len * 2.0).ceil().max(1.0) as usize;
            for i in 0..=n {
                let t = i as f64 / n as f64;
                if dash && (t * len) % 13.0 > 8.0 {
                    continue;
                }
                let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
                if width <= 1.0 {
                    self.put(x.floor() as i64, y.floor() as i64, c);
                } else {
                    self.dot(x, y, width / 2.0, c);
                }
            }
        }
        #[allow(clippy::too_many_arguments)]
        fn text(
            &mut self,
            p: (f64, f64),
            s: &str,
            size: f64,
            c: Rgb,
            anchor: Anchor,
            vertical: bool,
            bold: bool,
        ) {
            let n = s.chars().count() as i64;
            let room = if vertical { p.1 } else { self.w as f64 - p.0 };
            let scale = if size >= 15.0 && (n * 16) as f64 <= room {
                2
            } else {
                1
            };
            let adv = 8 * scale;
            let total = n * adv;
            let off = match anchor {
                Anchor::Start => 0,
                Anchor::Middle => total / 2,
                Anchor::End => total,
            };
            let (px, py) = (p.0.round() as i64, p.1.round() as i64);
            for (k, ch) in s.chars().enumerate() {
                let ch = if ch == '…' { '~' } else { ch };
                let glyph = font8x8::BASIC_FONTS.get(ch).unwrap_or([0; 8]);
                for (gy, row) in glyph.iter().enumerate() {
                    for gx in 0..8 {
                        if row & (1 << gx) == 0 {
                            continue;
                        }
                        for sy in 0..scale {
                            for sx in 0..scale {
                                // Glyph pixel relative to the text origin (baseline at y).
                                let u = k as i64 * adv + gx * scale + sx - off;
                                let v = gy as i64 * scale + sy - 7 * scale;
                                let (x, y) = if vertical {
                                    (px + v, py - u)
                                } else {
                                    (px + u, py + v)
                                };
                                self.put(x, y, c);
                                if bold {
                                    self.put(x + 1, y, c);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    pub(super) fn render(fig: &Figure) -> Vec<u8> {
        let mut cv = Canvas {
            w: fig.width as i64,
            h: fig.height as i64,
            px: vec![255; fig.width as usize * fig.height as usize * 3],
        };
        for s in &fig.shapes {
            match s {
                Shape::Line {
                    a,
                    b,
                    color,
                    width,
                    dash,
                    ..
                } => cv.line(*a, *b, *color, *width, *dash),
                Shape::Polyline {
                    pts, color, width, ..
                } => {
                    for w in pts.windows(2) {
                        cv.line(w[0], w[1], *color, *width, false);
                    }
                }
                Shape::Rect {
                    x,
                    y,
                    w,
                    h,
                    fill,
                    stroke,
                } => {
                    if let Some(c) = fill {
                        for yy in y.round() as i64..(y + h).round() as i64 {
                            for xx in x.round() as i64..(x + w).round() as i64 {
                                cv.put(xx, yy, *c);
                            }
                        }
                    }
                    if let Some(c) = stroke {
                        let (x0, y0, x1, y1) = (*x, *y, x + w, y + h);
                        cv.line((x0, y0), (x1, y0), *c, 1.0, false);
                        cv.line((x1, y0), (x1, y1), *c, 1.0, false);
                        cv.line((x1, y1), (x0, y1), *c, 1.0, false);
                        cv.line((x0, y1), (x0, y0), *c, 1.0, false);
                    }
                }
                Shape::Circle { c, r, color } => cv.dot(c.0, c.1, *r, *color),
                Shape::Text {
                    p,
                    text,
                    size,
                    color,
                    anchor,
                    vertical,
                    bold,
                } => cv.text(*p, text, *size, *color, *anchor, *vertical, *bold),
            }
        }
        cv.px
    }
}
