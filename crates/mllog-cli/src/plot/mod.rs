//! Charts of runs, drawn with `plotters`: one panel per benchmark (the eval metric against the
//! progress unit that benchmark logs, with its target line) and, when the logs have
//! `tracked_stats` `train_step_time`, the step-time distribution of every run on a log axis.
//!
//! Every run keeps one colour in the whole figure (a palette of [`PALETTE_SIZE`] colours, none
//! of them the target's red, repeated beyond that many runs); each panel lists its runs below
//! the plot, so a legend never covers data. Names are file names cut from the right: the start (round, submitter, system)
//! is what tells runs apart.
//!
//! Text in PNG is drawn by ab_glyph from DejaVu Sans compiled into the binary (the `dejavu`
//! crate's copy of the font, with its licence): no system font lookup, so a machine without fontconfig or installed fonts
//! gets the same picture. SVG names the family and leaves rendering to the viewer.

use std::io;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use mllog_core::results::summary::{RunSummary, TargetLine};

mod glyphs;

/// An RGB colour.
///
/// [`run_color`] and [`run_colors`] return them, so a caller can label runs in its own output
/// in the colours of the chart.
///
/// ```
/// use mllog_cli::plot::{run_color, run_colors, Rgb, PALETTE_SIZE, TARGET_COLOR};
/// use mllog_core::results::summary::RunSummary;
///
/// let first: Rgb = run_color(0);
/// assert_eq!(run_color(PALETTE_SIZE), first); // the palette repeats
/// assert!((0..PALETTE_SIZE).all(|i| run_color(i) != TARGET_COLOR));
/// let runs = vec![RunSummary::default(), RunSummary::default()];
/// assert_eq!(run_colors(&runs), vec![run_color(0), run_color(1)]);
/// ```
pub type Rgb = [u8; 3];

/// The colour of every target line.
pub const TARGET_COLOR: Rgb = [214, 39, 40];

/// How many runs get distinct colours; run `PALETTE_SIZE` reuses the first colour.
pub const PALETTE_SIZE: usize = PALETTE.len();

// Tableau 10 without its red (the target's), then dark and mid tones that stay apart from
// those on white, then the light half of Tableau 20: 26 colours, strong ones first. Runs take
// them panel by panel, so that the runs of one benchmark get neighbouring, strong colours.
const PALETTE: [Rgb; 26] = [
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
    [99, 121, 57],
    [140, 109, 49],
    [123, 65, 115],
    [0, 160, 135],
    [231, 186, 82],
    [107, 110, 207],
    [132, 60, 57],
    [0, 0, 0],
    [174, 199, 232],
    [255, 187, 120],
    [152, 223, 138],
    [197, 176, 213],
    [196, 156, 148],
    [247, 182, 210],
    [219, 219, 141],
    [158, 218, 229],
];

/// Palette colour `i` (the palette repeats after [`PALETTE_SIZE`]).
pub fn run_color(i: usize) -> Rgb {
    PALETTE[i % PALETTE.len()]
}

/// The colour of each of `runs`, in the order given: palette colours taken panel by panel
/// (benchmarks in name order), so each run keeps one colour in the whole figure.
pub fn run_colors(runs: &[RunSummary]) -> Vec<Rgb> {
    let mut out = vec![PALETTE[0]; runs.len()];
    for (k, i) in groups(runs).into_iter().flat_map(|(_, v)| v).enumerate() {
        out[i] = run_color(k);
    }
    out
}

/// The runs by benchmark (indices into `runs`), benchmarks in name order.
fn groups(runs: &[RunSummary]) -> Vec<(String, Vec<usize>)> {
    let mut g: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let b = r
            .benchmark
            .clone()
            .unwrap_or_else(|| "(no submission_benchmark)".into());
        match g.iter_mut().find(|(n, _)| *n == b) {
            Some((_, v)) => v.push(i),
            None => g.push((b, vec![i])),
        }
    }
    g.sort_by(|a, b| a.0.cmp(&b.0));
    g
}

const TEXT: Rgb = [30, 30, 30];
const GRID: Rgb = [228, 228, 228];
const AXIS: Rgb = [60, 60, 60];

// The family name SVG carries (with fallbacks for viewers without DejaVu) and under which the
// compiled-in font is registered for PNG.
const FAMILY: &str = "DejaVu Sans, Verdana, Arial, sans-serif";

// Text sizes in pixels (the glyph box height of the PNG; SVG scales them the same way).
const TITLE: f64 = 26.0;
const CAPTION: f64 = 19.0;
const LABEL: f64 = 16.0;
const TICK: f64 = 15.0;

const MARGIN: u32 = 20;
const TITLE_H: u32 = 50;
const CHART_H: u32 = 330;
const LEGEND_ROW: u32 = 22;
const STEP_ROW: u32 = 28;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // A failure shows up as a drawing error ("font unavailable") on the first text.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, dejavu::sans::regular());
    });
}

fn color(c: Rgb) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

fn font(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&color(TEXT))
}

/// Width in pixels of `s` at `size` (an estimate when the font cannot lay it out).
fn text_width(s: &str, size: f64) -> u32 {
    (FAMILY, size)
        .into_font()
        .box_size(s)
        .map_or((s.chars().count() as f64 * size * 0.6) as u32, |b| b.0)
}

/// `s` cut from the right with "…" so that it fits in `max` pixels.
fn fit(s: &str, size: f64, max: u32) -> String {
    if text_width(s, size) <= max {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut n = chars.len();
    while n > 0 {
        n -= 1;
        let t: String = chars[..n].iter().chain(std::iter::once(&'…')).collect();
        if text_width(&t, size) <= max {
            return t;
        }
    }
    "…".to_string()
}

/// The name a chart shows for a run: the file name without `.txt` (full; charts cut it from
/// the right to fit).
pub fn short_name(path: &str) -> String {
    let base = path.rsplit(['/', '\\']).next().unwrap_or(path);
    base.strip_suffix(".txt").unwrap_or(base).to_string()
}

/// `x` with at most 3 significant digits, trailing zeros dropped.
fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let d = (2 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{x:.d$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A duration in seconds in the unit that keeps it short: `350 µs`, `1.42 ms`, `50 s`.
fn fmt_seconds(s: f64) -> String {
    let a = s.abs();
    if a > 0.0 && a < 1e-3 {
        format!("{} µs", sig3(s * 1e6))
    } else if a > 0.0 && a < 1.0 {
        format!("{} ms", sig3(s * 1e3))
    } else {
        format!("{} s", sig3(s))
    }
}

/// An axis value at the precision the tick spacing `step` needs; large counts in k and M.
fn fmt_axis(v: f64, step: f64) -> String {
    let step = step.abs().max(f64::MIN_POSITIVE);
    let (scaled, scaled_step, suffix) = if v.abs() >= 1e6 && step >= 1e4 {
        (v / 1e6, step / 1e6, "M")
    } else if v.abs() >= 1e4 && step >= 100.0 {
        (v / 1e3, step / 1e3, "k")
    } else {
        (v, step, "")
    };
    let d = (-(scaled_step.log10().floor()) as i32 + 1).clamp(0, 9) as usize;
    let mut s = format!("{scaled:.d$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    format!("{s}{suffix}")
}

/// "Nice" linear tick positions in `[lo, hi]` (about `n`).
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut k = (lo / step).ceil();
    while k * step <= hi * (1.0 + 1e-12) && v.len() < 50 {
        v.push(k * step);
        k += 1.0;
    }
    v
}

/// Ticks of a log axis over `[lo, hi]` (`lo > 0`): decades when the range spans more than
/// two, 1-2-5 within one or two, linear ticks when it is narrower than a decade.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ratio = hi / lo;
    if ratio < 10.0 {
        return nice_ticks(lo, hi, 5);
    }
    let mults: &[f64] = if ratio > 300.0 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let mut v = Vec::new();
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi {
        for m in mults {
            // Rounded to the decade's precision so that 0.001 prints as 1 ms, not 0.999….
            let t: f64 = format!("{:e}", m * 10f64.powi(e)).parse().unwrap_or(0.0);
            if t >= lo && t <= hi {
                v.push(t);
            }
        }
        e += 1;
    }
    v
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let i = pos.floor() as usize;
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] + (sorted[j] - sorted[i]) * (pos - i as f64)
}

/// What a run's legend entry says after its name.
fn run_status(r: &RunSummary) -> String {
    let s = match (r.converged, r.time_to_train_min) {
        (true, Some(m)) => format!("{m:.1} min"),
        (true, None) => "converged".into(),
        (false, _) => r.status.clone().unwrap_or_else(|| "no run_stop".into()),
    };
    if r.evals.is_empty() {
        format!("{s}, no evals")
    } else {
        s
    }
}

/// The x-axis label for evals that carry `unit` (what [`RunSummary::x_unit`] names after the
/// metadata key): BERT's reference logs the samples trained so far as `epoch_num`, so its
/// "epochs" are samples.
fn axis_unit(benchmark: &str, unit: &str) -> String {
    match (benchmark, unit) {
        ("bert", "epochs") => "samples (logged as epoch_num)".into(),
        (_, "epochs") => "epochs (epoch_num)".into(),
        (_, "samples") => "samples (samples_count)".into(),
        (_, u) => u.into(),
    }
}

/// One benchmark's panel.
struct Panel {
    benchmark: String,
    /// Indices into the runs.
    runs: Vec<usize>,
    key: String,
    /// The x-axis label: the unit the runs log, or "eval number" when some eval lacks one.
    unit: String,
    by_index: bool,
    target: Option<TargetLine>,
    /// Legend columns (filled top to bottom): several when the names are short.
    legend_cols: u32,
}

impl Panel {
    fn legend_rows(&self) -> u32 {
        (self.runs.len() as u32).div_ceil(self.legend_cols.max(1))
    }
}

/// A legend entry: the name, then what became of the run.
fn legend_entry(r: &RunSummary) -> (String, String) {
    (short_name(&r.path), format!("  ({})", run_status(r)))
}

// Swatch and gap before a legend name, and the gap between legend columns.
const SWATCH_W: u32 = 44;
const LEGEND_GAP: u32 = 24;

/// The sizes of the figure, worked out before drawing.
struct Plan {
    width: u32,
    height: u32,
    cols: u32,
    panel_w: u32,
    /// Top and height of each row of panels.
    rows: Vec<(u32, u32)>,
    panels: Vec<Panel>,
    /// Runs with step times: (run index, sorted positive times).
    steps: Vec<(usize, Vec<f64>)>,
    steps_top: u32,
    /// Each run's colour.
    colors: Vec<Rgb>,
}

fn plan(runs: &[RunSummary]) -> Plan {
    let mut panels: Vec<Panel> = groups(runs)
        .into_iter()
        .map(|(benchmark, runs)| Panel {
            benchmark,
            runs,
            key: String::new(),
            unit: String::new(),
            by_index: false,
            target: None,
            legend_cols: 1,
        })
        .collect();
    for p in &mut panels {
        p.target = p.runs.iter().find_map(|&i| runs[i].target.clone());
        p.key = p
            .target
            .as_ref()
            .map_or("eval_accuracy", |t| t.key.as_str())
            .to_string();
        p.by_index = p
            .runs
            .iter()
            .any(|&i| runs[i].evals.iter().any(|e| e.x.is_none()));
        let mut units: Vec<&str> = p
            .runs
            .iter()
            .filter(|&&i| !runs[i].evals.is_empty())
            .map(|&i| runs[i].x_unit)
            .collect();
        units.sort_unstable();
        units.dedup();
        p.unit = if p.by_index {
            "eval number".into()
        } else if units.is_empty() {
            "samples".into()
        } else {
            // Runs of one benchmark that count in different units: said, not hidden.
            units
                .iter()
                .map(|u| axis_unit(&p.benchmark, u))
                .collect::<Vec<_>>()
                .join(" or ")
        };
    }
    let cols: u32 = if panels.len() <= 1 { 1 } else { 2 };
    let width = if cols == 1 { 1000 } else { 1240 };
    let panel_w = (width - 2 * MARGIN - (cols - 1) * MARGIN) / cols;
    for p in &mut panels {
        let widest = p
            .runs
            .iter()
            .map(|&i| {
                let (name, status) = legend_entry(&runs[i]);
                SWATCH_W + text_width(&format!("{name}{status}"), LABEL) + LEGEND_GAP
            })
            .max()
            .unwrap_or(panel_w);
        p.legend_cols = (panel_w / widest.max(1))
            .clamp(1, 4)
            .min(p.runs.len().max(1) as u32);
    }
    let mut rows = Vec::new();
    let mut y = MARGIN + TITLE_H;
    for row in panels.chunks(cols as usize) {
        let n = row.iter().map(Panel::legend_rows).max().unwrap_or(0);
        let h = CHART_H + 8 + n * LEGEND_ROW;
        rows.push((y, h));
        y += h + MARGIN;
    }
    let steps: Vec<(usize, Vec<f64>)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let mut v: Vec<f64> = r
                .step_times_s
                .iter()
                .copied()
                .filter(|x| x.is_finite() && *x > 0.0)
                .collect();
            v.sort_by(f64::total_cmp);
            (!v.is_empty()).then_some((i, v))
        })
        .collect();
    let steps_top = y;
    if !steps.is_empty() {
        y += steps_height(steps.len()) + MARGIN;
    }
    Plan {
        width,
        height: y.max(MARGIN + TITLE_H + 100),
        cols,
        panel_w,
        rows,
        panels,
        steps,
        steps_top,
        colors: run_colors(runs),
    }
}

fn steps_height(rows: usize) -> u32 {
    // Caption, rows, tick labels and the two-line axis description.
    40 + rows.max(2) as u32 * STEP_ROW + 80
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunSummary],
    p: &Plan,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let converged = runs.iter().filter(|r| r.converged).count();
    let title = if p.panels.len() == 1 {
        format!(
            "{}: {} run{}, {converged} converged",
            p.panels[0].benchmark,
            runs.len(),
            if runs.len() == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "MLPerf Training: {} runs of {} benchmarks, {converged} converged",
            runs.len(),
            p.panels.len()
        )
    };
    root.draw(&Text::new(
        fit(&title, TITLE, p.width - 2 * MARGIN),
        (MARGIN as i32, MARGIN as i32),
        font(TITLE).pos(Pos::new(HPos::Left, VPos::Top)),
    ))?;
    for (k, panel) in p.panels.iter().enumerate() {
        let (top, h) = p.rows[k / p.cols as usize];
        let left = MARGIN + (k as u32 % p.cols) * (p.panel_w + MARGIN);
        let area = root.clone().shrink((left, top), (p.panel_w, h));
        draw_panel(root, &area, runs, &p.colors, panel, p.panel_w)?;
    }
    if !p.steps.is_empty() {
        let area = root.clone().shrink(
            (MARGIN, p.steps_top),
            (p.width - 2 * MARGIN, steps_height(p.steps.len())),
        );
        draw_steps(root, &area, runs, &p.colors, &p.steps, p.width - 2 * MARGIN)?;
    }
    root.present()
}

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    runs: &[RunSummary],
    colors: &[Rgb],
    panel: &Panel,
    w: u32,
) -> DrawResult<DB> {
    let (chart_area, legend) = area.split_vertically(CHART_H);
    let point = |k: usize, e: &mllog_core::results::summary::EvalPoint| -> f64 {
        if panel.by_index {
            k as f64 + 1.0
        } else {
            e.x.unwrap_or(k as f64 + 1.0)
        }
    };
    let xs: Vec<f64> = panel
        .runs
        .iter()
        .flat_map(|&i| runs[i].evals.iter().enumerate().map(|(k, e)| point(k, e)))
        .filter(|x| x.is_finite())
        .collect();
    let mut ys: Vec<f64> = panel
        .runs
        .iter()
        .flat_map(|&i| runs[i].evals.iter().map(|e| e.value))
        .filter(|v| v.is_finite())
        .collect();
    if let Some(t) = &panel.target {
        ys.push(t.value);
    }
    let xlo = xs.iter().copied().fold(0.0, f64::min);
    let mut xhi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !xhi.is_finite() || xhi <= xlo {
        xhi = xlo + 1.0;
    }
    xhi += (xhi - xlo) * 0.03;
    let mut ylo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let mut yhi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !ylo.is_finite() || !yhi.is_finite() {
        (ylo, yhi) = (0.0, 1.0);
    }
    let span = (yhi - ylo).max(yhi.abs() * 0.01).max(1e-6);
    ylo -= span * 0.08;
    yhi += span * 0.08;
    // Room for the target's label on its side of the line.
    if let Some(t) = &panel.target {
        let room = (yhi - ylo) * 0.12;
        if t.higher_is_better {
            yhi = yhi.max(t.value + room);
        } else {
            ylo = ylo.min(t.value - room);
        }
    }
    let caption = fit(
        &format!(
            "{}: {} vs {}",
            panel.benchmark,
            panel.key,
            panel.unit.split(" (").next().unwrap_or(&panel.unit)
        ),
        CAPTION,
        w,
    );
    let xstep = nice_ticks(xlo, xhi, 6)
        .windows(2)
        .map(|w| w[1] - w[0])
        .next()
        .unwrap_or(xhi - xlo);
    let ystep = nice_ticks(ylo, yhi, 6)
        .windows(2)
        .map(|w| w[1] - w[0])
        .next()
        .unwrap_or(yhi - ylo);
    let xfmt = |v: &f64| fmt_axis(*v, xstep);
    let yfmt = |v: &f64| fmt_axis(*v, ystep);
    let ylabel_w = nice_ticks(ylo, yhi, 6)
        .iter()
        .map(|v| text_width(&yfmt(v), TICK))
        .max()
        .unwrap_or(40)
        + 14;
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(caption, font(CAPTION))
        .margin_top(4)
        .margin_right(16)
        .x_label_area_size(54)
        .y_label_area_size(ylabel_w)
        .build_cartesian_2d(xlo..xhi, ylo..yhi)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .x_desc(panel.unit.clone())
        .label_style(font(TICK))
        .axis_desc_style(font(LABEL))
        .bold_line_style(color(GRID))
        .light_line_style(TRANSPARENT)
        .axis_style(color(AXIS))
        .draw()?;
    if let Some(t) = &panel.target {
        let style = color(TARGET_COLOR).stroke_width(2);
        chart.draw_series(DashedLineSeries::new(
            [(xlo, t.value), (xhi, t.value)],
            9,
            6,
            style,
        ))?;
        let (px, py) = chart.backend_coord(&(xlo, t.value));
        let (dy, v) = if t.higher_is_better {
            (-4, VPos::Bottom)
        } else {
            (5, VPos::Top)
        };
        root.draw(&Text::new(
            format!(
                "target {} {}",
                if t.higher_is_better { "≥" } else { "≤" },
                t.value
            ),
            (px + 8, py + dy),
            font(LABEL)
                .color(&color(TARGET_COLOR))
                .pos(Pos::new(HPos::Left, v)),
        ))?;
    }
    for &i in &panel.runs {
        let c = color(colors[i]);
        let pts: Vec<(f64, f64)> = runs[i]
            .evals
            .iter()
            .enumerate()
            .map(|(k, e)| (point(k, e), e.value))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    // The legend: below the plot, in columns filled top to bottom.
    let (lx0, ly) = (legend.get_base_pixel().0, legend.get_base_pixel().1 + 8);
    let (col_w, nrows) = (w / panel.legend_cols.max(1), panel.legend_rows().max(1));
    for (k, &i) in panel.runs.iter().enumerate() {
        let (col, row) = (k as u32 / nrows, k as u32 % nrows);
        let lx = lx0 + (col * col_w) as i32;
        let y = ly + (row * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        root.draw(&PathElement::new(
            [(lx + 8, y), (lx + 36, y)],
            color(colors[i]).stroke_width(4),
        ))?;
        let (name, status) = legend_entry(&runs[i]);
        let room = col_w.saturating_sub(SWATCH_W + 4 + text_width(&status, LABEL));
        let name = fit(&name, LABEL, room);
        root.draw(&Text::new(
            format!("{name}{status}"),
            (lx + 44, y),
            font(LABEL).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

fn draw_steps<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    runs: &[RunSummary],
    colors: &[Rgb],
    rows: &[(usize, Vec<f64>)],
    w: u32,
) -> DrawResult<DB> {
    let n = rows.len();
    let mut lo = rows.iter().map(|(_, v)| v[0]).fold(f64::INFINITY, f64::min);
    let mut hi = rows.iter().map(|(_, v)| v[v.len() - 1]).fold(0.0, f64::max);
    // At least a factor 2 around the data, so that ticks are readable and distinct.
    if hi / lo < 2.0 {
        let c = (lo * hi).sqrt();
        (lo, hi) = (c / 2f64.sqrt(), c * 2f64.sqrt());
    } else if hi / lo > 300.0 {
        // Decade ticks only: the axis ends on decades.
        (lo, hi) = (
            10f64.powf((lo / 1.05).log10().floor()),
            10f64.powf((hi * 1.05).log10().ceil()),
        );
    } else {
        (lo, hi) = (lo / 1.25, hi * 1.25);
    }
    let ticks = log_ticks(lo, hi);
    let medians: Vec<String> = rows
        .iter()
        .map(|(_, v)| format!("median {}", fmt_seconds(quantile(v, 0.5))))
        .collect();
    let right_w = medians
        .iter()
        .map(|s| text_width(s, LABEL))
        .max()
        .unwrap_or(0)
        + 16;
    let names: Vec<String> = rows
        .iter()
        .map(|(i, _)| fit(&short_name(&runs[*i].path), LABEL, w * 2 / 5))
        .collect();
    let left_w = names
        .iter()
        .map(|s| text_width(s, LABEL))
        .max()
        .unwrap_or(0)
        + 12;
    let caption = fit(
        "Step time per run: train_step_time of each tracked_stats record",
        CAPTION,
        w,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(CAPTION))
        .margin_top(4)
        .margin_right(right_w)
        .x_label_area_size(80)
        .y_label_area_size(left_w)
        .build_cartesian_2d(
            (lo..hi).log_scale().with_key_points(ticks.clone()),
            0f64..n as f64,
        )?;
    let xfmt = |v: &f64| fmt_seconds(*v);
    chart
        .configure_mesh()
        .x_label_formatter(&xfmt)
        .y_labels(0)
        .disable_y_mesh()
        .label_style(font(TICK))
        .bold_line_style(color(GRID))
        .light_line_style(TRANSPARENT)
        .axis_style(color(AXIS))
        .draw()?;
    let plot = chart.plotting_area().get_pixel_range();
    let desc = [
        "seconds per step (log scale)",
        "dot and line: median, box: quartiles, whiskers: 5th to 95th percentile",
    ];
    for (k, d) in desc.iter().enumerate() {
        root.draw(&Text::new(
            fit(d, LABEL, w),
            (
                (plot.0.start + plot.0.end) / 2,
                plot.1.end + 30 + k as i32 * 22,
            ),
            font(LABEL).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    for (k, (i, v)) in rows.iter().enumerate() {
        let y = (n - k) as f64 - 0.5;
        let c = color(colors[*i]);
        let q = |p| quantile(v, p);
        chart.draw_series([
            PathElement::new([(q(0.05), y), (q(0.95), y)], c.stroke_width(2)),
            PathElement::new([(q(0.05), y - 0.2), (q(0.05), y + 0.2)], c.stroke_width(2)),
            PathElement::new([(q(0.95), y - 0.2), (q(0.95), y + 0.2)], c.stroke_width(2)),
        ])?;
        chart.draw_series([Rectangle::new(
            [(q(0.25), y - 0.3), (q(0.75), y + 0.3)],
            c.filled(),
        )])?;
        chart.draw_series([Rectangle::new(
            [(q(0.25), y - 0.3), (q(0.75), y + 0.3)],
            color(AXIS).stroke_width(1),
        )])?;
        chart.draw_series([PathElement::new(
            [(q(0.5), y - 0.34), (q(0.5), y + 0.34)],
            color(TEXT).stroke_width(2),
        )])?;
        // The median also as a dot in the run's colour: most runs' quartiles are a few pixels
        // apart on an axis that spans decades.
        chart.draw_series([Circle::new((q(0.5), y), 6, c.filled())])?;
        chart.draw_series([Circle::new((q(0.5), y), 6, color(TEXT).stroke_width(1))])?;
        let (_, py) = chart.backend_coord(&(lo, y));
        root.draw(&Text::new(
            names[k].clone(),
            (plot.0.start - 8, py),
            font(LABEL).pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
        root.draw(&Text::new(
            medians[k].clone(),
            (plot.0.end + 10, py),
            font(LABEL).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

fn other<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(format!("cannot draw the plot: {e}"))
}

/// The chart of `runs` as an SVG document.
pub fn render_svg(runs: &[RunSummary]) -> io::Result<String> {
    register_font();
    let p = plan(runs);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (p.width, p.height)).into_drawing_area();
        draw(&root, runs, &p).map_err(other)?;
    }
    Ok(out)
}

/// A rendered chart: RGB pixels, row-major, 3 bytes a pixel.
///
/// Returned by [`render_rgb`], for a caller that encodes or shows pixels itself
/// ([`render_png`] encodes them as PNG).
///
/// ```
/// use mllog_cli::plot::{render_rgb, Bitmap, TARGET_COLOR};
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::summary::summarize_text;
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let run = summarize_text("result_0.txt", &log);
/// let b: Bitmap = render_rgb(&[run]).unwrap();
/// assert!(b.width > 0 && b.height > 0);
/// assert_eq!(b.rgb.len(), b.width as usize * b.height as usize * 3);
/// // The target line is drawn in its red.
/// assert!(b.rgb.chunks_exact(3).any(|px| px == TARGET_COLOR));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Bitmap {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub rgb: Vec<u8>,
}

/// The chart of `runs` as pixels.
pub fn render_rgb(runs: &[RunSummary]) -> io::Result<Bitmap> {
    register_font();
    let p = plan(runs);
    let mut rgb = vec![255u8; p.width as usize * p.height as usize * 3];
    {
        let backend = glyphs::Glyphs {
            inner: BitMapBackend::with_buffer(&mut rgb, (p.width, p.height)),
            font: ab_glyph::FontRef::try_from_slice(dejavu::sans::regular()).map_err(other)?,
        };
        let root = backend.into_drawing_area();
        draw(&root, runs, &p).map_err(other)?;
    }
    Ok(Bitmap {
        width: p.width,
        height: p.height,
        rgb,
    })
}

/// The chart of `runs` as a PNG file (RGB, 8 bits).
pub fn render_png(runs: &[RunSummary]) -> io::Result<Vec<u8>> {
    let b = render_rgb(runs)?;
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, b.width, b.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(io::Error::other)?;
        w.write_image_data(&b.rgb).map_err(io::Error::other)?;
    }
    Ok(out)
}

/// The file extensions [`write_plot`] writes.
pub const PLOT_EXTENSIONS: [&str; 2] = ["svg", "png"];

/// Writes the chart of `runs` to `path`: SVG for `.svg`, PNG for `.png`; any other extension
/// is an `InvalidInput` error, so that `out.jpg` never holds SVG.
pub fn write_plot(runs: &[RunSummary], path: &Path) -> io::Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !PLOT_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(ext)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unsupported plot format {ext:?}: the file name must end in .svg or .png"),
        ));
    }
    let bytes = if ext.eq_ignore_ascii_case("png") {
        render_png(runs)?
    } else {
        render_svg(runs)?.into_bytes()
    };
    std::fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_readable() {
        let t: Vec<String> = log_ticks(0.0011, 62.0)
            .iter()
            .map(|&v| fmt_seconds(v))
            .collect();
        assert_eq!(t, ["10 ms", "100 ms", "1 s", "10 s"]);
        let t: Vec<String> = log_ticks(0.0009, 62.0)
            .iter()
            .map(|&v| fmt_seconds(v))
            .collect();
        assert_eq!(t, ["1 ms", "10 ms", "100 ms", "1 s", "10 s"]);
        // Ten runs of one benchmark around 0.3 ms: distinct labels.
        let t: Vec<String> = log_ticks(0.0003 / 1.41, 0.0003 * 1.41)
            .iter()
            .map(|&v| fmt_seconds(v))
            .collect();
        assert!(t.len() >= 3, "{t:?}");
        let mut d = t.clone();
        d.dedup();
        assert_eq!(d, t);
        assert!(t.iter().all(|s| s.ends_with("µs")), "{t:?}");
    }

    #[test]
    fn names_are_cut_from_the_right() {
        register_font();
        let n = short_name(
            "a/b/v5.1_University-of-Florida_llama31_405b_hpg-dgxb200x8-n32_result_0.txt",
        );
        assert_eq!(
            n,
            "v5.1_University-of-Florida_llama31_405b_hpg-dgxb200x8-n32_result_0"
        );
        let f = fit(&n, LABEL, 200);
        assert!(f.starts_with("v5.1_Univ") && f.ends_with('…'), "{f}");
        assert!(text_width(&f, LABEL) <= 200);
    }

    #[test]
    fn degenerate_runs_still_draw() {
        use mllog_core::results::summary::EvalPoint;
        let odd = RunSummary {
            path: "x/result_0.txt".into(),
            evals: vec![
                EvalPoint {
                    x: Some(f64::INFINITY),
                    value: f64::NAN,
                    time_ms: 0,
                },
                EvalPoint {
                    x: Some(5.0),
                    value: 0.5,
                    time_ms: 1,
                },
            ],
            step_times_s: vec![0.0, -1.0, f64::NAN, 0.25],
            ..RunSummary::default()
        };
        for runs in [vec![], vec![RunSummary::default()], vec![odd]] {
            let svg = render_svg(&runs).unwrap();
            assert!(svg.starts_with("<svg"), "{svg}");
            let b = render_rgb(&runs).unwrap();
            assert_eq!(b.rgb.len(), (b.width * b.height * 3) as usize);
        }
    }

    #[test]
    fn axis_values_keep_the_precision_of_their_step() {
        assert_eq!(fmt_axis(2_500_000.0, 500_000.0), "2.5M");
        assert_eq!(fmt_axis(40_000.0, 20_000.0), "40k");
        assert_eq!(fmt_axis(0.725, 0.025), "0.725");
        assert_eq!(fmt_axis(0.7, 0.05), "0.7");
        assert_eq!(fmt_axis(3.0, 1.0), "3");
    }
}
