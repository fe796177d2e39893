//! The PNG chart of a bench run: pipelined ms per training step per model, one bar per device
//! (ours, and PyTorch's where measured), on a log scale since the zoo spans three decades.

use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use super::report::Report;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 560;
const COLORS: [RGBColor; 6] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(140, 86, 75)];

/// Each bar series: its legend label, and per model the pipelined median in ms (if measured).
fn series(report: &Report, models: &[String]) -> Vec<(String, Vec<Option<f64>>)> {
    let mut out: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for r in &report.rows {
        let i = models.iter().position(|m| *m == r.model).unwrap_or(0);
        let sides = [
            (format!("ours {} {}", r.device, r.precision), r.ours.as_ref().ok()),
            (format!("PyTorch {} {}", r.device, r.precision), r.torch.as_ref().and_then(|t| t.as_ref().ok())),
        ];
        for (label, times) in sides {
            let Some(t) = times else { continue };
            let k = match out.iter().position(|(l, _)| *l == label) {
                Some(k) => k,
                None => {
                    out.push((label, vec![None; models.len()]));
                    out.len() - 1
                }
            };
            out[k].1[i] = Some(t.pipelined.median_ms);
        }
    }
    out
}

/// The chart as PNG bytes.
pub fn png(report: &Report) -> Result<Vec<u8>, String> {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The bytes are a valid TrueType font compiled in; a failure here is a broken build.
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans font does not parse"));
    });
    let mut models: Vec<String> = Vec::new();
    for r in &report.rows {
        if !models.contains(&r.model) {
            models.push(r.model.clone());
        }
    }
    let bars = series(report, &models);
    let values: Vec<f64> = bars.iter().flat_map(|(_, v)| v.iter().flatten().copied()).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if values.is_empty() { (0.1, 10.0) } else { (lo / 2.0, hi * 2.0) };
    let draw = |e: &dyn std::fmt::Display| format!("drawing the chart failed: {e}");
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let n = models.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("ms per training step (pipelined median, log scale), {}", report.date), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n, (lo..hi).log_scale())
            .map_err(|e| draw(&e))?;
        let labels = models.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(models.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - i as f64 - 0.5).abs() < 0.26 {
                    labels.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("ms")
            .draw()
            .map_err(|e| draw(&e))?;
        let width = 0.8 / bars.len().max(1) as f64;
        for (k, (label, values)) in bars.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let rects = values.iter().enumerate().filter_map(|(i, v)| {
                let x0 = i as f64 + 0.1 + k as f64 * width;
                v.map(|v| Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], color.filled()))
            });
            chart
                .draw_series(rects)
                .map_err(|e| draw(&e))?
                .label(label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| draw(&e))?;
        root.present().map_err(|e| draw(&e))?;
    }
    let image = image::RgbImage::from_raw(WIDTH, HEIGHT, pixels).ok_or("the chart's buffer has the wrong size")?;
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| format!("encoding the chart as PNG failed: {e}"))?;
    Ok(png)
}
