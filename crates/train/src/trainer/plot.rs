//! The history as a PNG: one panel per quantity (loss, each metric), train and validation
//! against the epoch. Drawn with `plotters` into a bitmap, with DejaVu Sans compiled into the
//! program, so it needs no system fonts or libraries.

use std::path::Path;
use std::sync::Once;

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

/// Draws `history` into the PNG file `path` (written atomically).
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
    let height = PANEL_HEIGHT * names.len() as u32;
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height)).into_drawing_area();
        let draw = |e: &dyn std::fmt::Display| bad(format!("drawing failed: {e}"));
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let (x0, x1) = (epochs.iter().cloned().fold(f64::INFINITY, f64::min), epochs.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
        let x_range = if x1 > x0 { x0..x1 } else { x0 - 0.5..x0 + 0.5 };
        for (area, name) in root.split_evenly((names.len(), 1)).iter().zip(&names) {
            let series: Vec<Series> = [(name.clone(), BLUE), (format!("val_{name}"), RED)]
                .into_iter()
                .filter_map(|(col, color)| {
                    let values = history.column(&col)?;
                    let points: Vec<(f64, f64)> = epochs.iter().zip(values).filter(|(_, v)| v.is_finite()).map(|(e, v)| (*e, v)).collect();
                    (!points.is_empty()).then_some((col, points, color))
                })
                .collect();
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
                .build_cartesian_2d(x_range.clone(), lo - pad..hi + pad)
                .map_err(|e| draw(&e))?;
            chart.configure_mesh().x_desc("epoch").x_label_formatter(&|x| format!("{x:.0}")).draw().map_err(|e| draw(&e))?;
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
