//! The history as a PNG: one panel per quantity (loss, each metric), train and validation
//! against the epoch. Drawn with `plotters` into a bitmap, with DejaVu Sans compiled into the
//! program, so it needs no system fonts or libraries.

use std::ops::Range;
use std::path::Path;
use std::sync::Once;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::history::{write_atomic, History};
use crate::error::{Error, Result};

const WIDTH: u32 = 900;
const PANEL_HEIGHT: u32 = 320;

/// One line of a panel: its name, its (epoch, value) points and its colour.
type Series = (String, Vec<(f64, f64)>, RGBColor);

/// The quantities to draw: every column but `epoch`, `lr` and `time_s`, with `val_x` drawn in
/// the panel of `x`.
fn panels(history: &History) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &history.columns {
        let base = c.strip_prefix("val_").unwrap_or(c);
        if !matches!(base, "epoch" | "lr" | "time_s") && !out.iter().any(|p| p == base) {
            out.push(base.to_string());
        }
    }
    out
}

/// Draws `history` into the PNG file `path` (written atomically). A history with no finite
/// value to draw is an error, not a blank picture.
pub fn plot_history(history: &History, path: &Path) -> Result<()> {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The bytes are a valid TrueType font compiled in; a failure here is a broken build.
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans font does not parse"));
    });
    let bad = |detail: String| Error::State { op: "plot", detail: format!("{}: {detail}", path.display()) };
    let names = panels(history);
    if names.is_empty() || history.is_empty() {
        return Err(bad("the history has no epochs or no values to plot".into()));
    }
    let epochs = history.column("epoch").ok_or_else(|| bad("the history has no `epoch` column".into()))?;
    let panels: Vec<(&String, Vec<Series>)> = names
        .iter()
        .map(|name| {
            let series = [(name.clone(), BLUE), (format!("val_{name}"), RED)]
                .into_iter()
                .filter_map(|(col, color)| {
                    let values = history.column(&col)?;
                    let points: Vec<(f64, f64)> = epochs.iter().zip(values).filter(|(e, v)| e.is_finite() && v.is_finite()).map(|(e, v)| (*e, v)).collect();
                    (!points.is_empty()).then_some((col, points, color))
                })
                .collect();
            (name, series)
        })
        .collect();
    if panels.iter().all(|(_, series)| series.is_empty()) {
        return Err(bad(format!("nothing to draw: no epoch has a finite value of {}; a run that went NaN from the start has no curve", names.join(", "))));
    }
    let xs: Vec<f64> = panels.iter().flat_map(|(_, s)| s.iter().flat_map(|(_, p, _)| p.iter().map(|(x, _)| *x))).collect();
    let (x0, x1) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let x_range = if x1 > x0 { x0..x1 } else { x0 - 0.5..x0 + 0.5 };
    let ticks = match whole_ticks(x_range.start, x_range.end) {
        t if t.is_empty() => distinct(xs),
        t => t,
    };
    let height = PANEL_HEIGHT * names.len() as u32;
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height)).into_drawing_area();
        let draw = |e: &dyn std::fmt::Display| bad(format!("drawing failed: {e}"));
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        for (area, (name, series)) in root.split_evenly((names.len(), 1)).iter().zip(panels) {
            let ys = series.iter().flat_map(|(_, p, _)| p.iter().map(|(_, y)| *y));
            let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
            if !lo.is_finite() {
                continue; // a column with no finite value: leave its panel empty
            }
            let pad = if hi > lo { (hi - lo) * 0.08 } else { lo.abs().max(1.0) * 0.05 };
            let mut chart = ChartBuilder::on(area)
                .caption(name, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d(EpochAxis { range: x_range.clone(), ticks: ticks.clone() }, lo - pad..hi + pad)
                .map_err(|e| draw(&e))?;
            chart.configure_mesh().x_desc("epoch").x_label_formatter(&|x| format!("{x}")).draw().map_err(|e| draw(&e))?;
            for (label, points, color) in series {
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .map_err(|e| draw(&e))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| draw(&e))?;
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| draw(&e))?;
        }
        root.present().map_err(|e| draw(&e))?;
    }
    let image = image::RgbImage::from_raw(WIDTH, height, pixels).expect("the buffer was sized for this image");
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| bad(format!("PNG encoding failed: {e}")))?;
    write_atomic(path, &png)
}

/// The x axis: epochs (f64, as the history holds them) with ticks where we put them.
/// (plotters' own f64 axis picks "nice" fractional ticks, which a whole-number label turns into
/// `1 1 1 2 2 2`.)
struct EpochAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for EpochAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        limit.0 + ((value - self.range.start) / span * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points get labels; no light grid lines between epochs.
        match hint.weight().allow_light_points() {
            true => Vec::new(),
            false => self.ticks.clone(),
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// At most this many ticks on the x axis.
const MAX_TICKS: usize = 12;

/// Whole-number ticks from `lo` to `hi`: every one when they are few, else every 2nd, 5th,
/// 10th, 20th... (epochs are whole numbers; a tick at 1.5 would be printed as "2").
fn whole_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (first, last) = (lo.ceil(), hi.floor());
    // NaN bounds, or no whole number between them.
    if first.partial_cmp(&last).is_none_or(|o| o == std::cmp::Ordering::Greater) {
        return Vec::new();
    }
    let mut step = 1.0;
    while (last - first) / step > (MAX_TICKS - 1) as f64 {
        step = [2.0, 5.0, 10.0].into_iter().map(|m| m * step).find(|s| (last - first) / s <= (MAX_TICKS - 1) as f64).unwrap_or(step * 10.0);
    }
    let start = (first / step).ceil() * step;
    (0..).map(|i| start + i as f64 * step).take_while(|t| *t <= last).collect()
}

/// The x values themselves, for data with no whole number in its range.
fn distinct(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs.truncate(MAX_TICKS);
    xs
}

#[cfg(test)]
mod tests {
    use super::whole_ticks;

    #[test]
    fn epoch_ticks_are_whole_numbers_each_once() {
        assert_eq!(whole_ticks(1.0, 3.0), [1.0, 2.0, 3.0]);
        assert_eq!(whole_ticks(0.5, 1.5), [1.0]); // one epoch
        assert_eq!(whole_ticks(1.0, 12.0), (1..=12).map(f64::from).collect::<Vec<_>>());
        assert_eq!(whole_ticks(1.0, 30.0), [5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
        assert_eq!(whole_ticks(1.0, 1000.0), [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0]);
        assert!(whole_ticks(0.2, 0.8).is_empty());
    }
}
