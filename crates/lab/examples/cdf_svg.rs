//! CDF plot for bench/thin-latency: reads a JSON object
//! `{"series name": [latency_ms, ...], ...}` and writes an SVG with two
//! panels: the whole distribution (x cut at the largest 99.9th percentile)
//! and the tail (fraction 0.9 .. 1, x up to the largest maximum).
//!
//! Usage: cdf_svg LATENCIES.json OUT.svg [TITLE]

use plotters::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: cdf_svg LATENCIES.json OUT.svg [TITLE]".into());
    }
    let text = std::fs::read_to_string(&args[1])?;
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)?;
    let mut series: Vec<(String, Vec<f64>)> = map
        .into_iter()
        .map(|(k, v)| {
            let mut xs: Vec<f64> = v
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                .unwrap_or_default();
            xs.sort_by(f64::total_cmp);
            (k, xs)
        })
        .filter(|(_, xs)| !xs.is_empty())
        .collect();
    series.sort_by(|a, b| a.0.cmp(&b.0));
    let q = |xs: &[f64], p: f64| xs[((p * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1];
    let x999 = series.iter().map(|(_, x)| q(x, 0.999)).fold(1.0, f64::max) * 1.05;
    let xmax = series.iter().map(|(_, x)| q(x, 1.0)).fold(1.0, f64::max) * 1.05;
    let title = args.get(3).cloned().unwrap_or_else(|| "latency CDF".into());
    let root = SVGBackend::new(&args[2], (1200, 1000)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(500);
    for (area, ymin, xhi, caption) in [
        (
            &top,
            0.0,
            x999,
            format!("{title} (x cut at the largest p99.9)"),
        ),
        (&bottom, 0.9, xmax, "tail: fraction 0.9 .. 1".to_string()),
    ] {
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..xhi, ymin..1.0)?;
        chart
            .configure_mesh()
            .x_desc("one-way latency (ms)")
            .y_desc("fraction of messages")
            .draw()?;
        for (i, (name, xs)) in series.iter().enumerate() {
            let n = xs.len() as f64;
            let color = Palette99::pick(i).to_rgba();
            // Thin the steps to at most ~2000 points per series.
            let step = (xs.len() / 2000).max(1);
            let pts = xs
                .iter()
                .enumerate()
                .filter(|(j, _)| j % step == 0 || *j == xs.len() - 1)
                .map(|(j, x)| (x.min(xhi), (j + 1) as f64 / n))
                .filter(|(_, y)| *y >= ymin);
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
