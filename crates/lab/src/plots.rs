//! SVG plots of one scenario, drawn from a stored `results.json` value
//! (never by re-running): latency per retransmission number per variant
//! (p50–p99 box, whisker to the maximum, dot at the mean; 002 Fig. 5.6's
//! box plots as far as the stored statistics allow), latency CDFs (whole
//! and tail), MTT per loss position for `drop-data-packet` sweeps (003
//! Fig. 2), response time against loss with the model's curve (001 Fig. 4),
//! and throughput per interval for scenarios with `[metrics] throughput`
//! (002 Fig. 5.20).
//!
//! plotters' SVG backend without its `ttf` feature writes text as SVG
//! `<text>` elements (the viewer's sans-serif font) and estimates text
//! sizes itself, so no system fonts are needed to draw.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

/// One drawn plot.
#[derive(Clone, Debug)]
pub struct Plot {
    /// File name (no folder), e.g. `latency-by-rtx.svg`.
    pub file: String,
    /// One-line caption for the report.
    pub caption: String,
    pub svg: String,
}

const SIZE: (u32, u32) = (820, 460);
const FONT: &str = "sans-serif";

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

fn color(i: usize) -> RGBColor {
    // Colour-blind-friendly (Okabe-Ito), then plotters' palette.
    const OI: [RGBColor; 7] = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
        RGBColor(0, 0, 0),
    ];
    OI.get(i).copied().unwrap_or_else(|| {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    })
}

fn draw(file: &str, caption: String, f: impl FnOnce(&Area) -> Result<(), String>) -> Option<Plot> {
    let mut svg = String::new();
    let ok = {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let r = root
            .fill(&WHITE)
            .map_err(err)
            .and_then(|()| f(&root))
            .and_then(|()| root.present().map_err(err));
        r.is_ok()
    };
    ok.then(|| Plot {
        file: file.to_string(),
        caption,
        svg,
    })
}

fn available(results: &Value) -> Vec<&Value> {
    results["variants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["available"].as_bool() == Some(true))
        .collect()
}

fn name(v: &Value) -> String {
    v["name"].as_str().unwrap_or("?").to_string()
}

/// The description of a latency kind for axis titles and table headers:
/// delivery latencies (`application*`, `transport*`) are above the minimum
/// one-way delay when the scenario removes it (`owd` as in results.json).
pub fn latency_label(kind: &str, owd: &str) -> String {
    format!("{}, ms", latency_name(kind, owd))
}

/// [`latency_label`] without the unit.
pub fn latency_name(kind: &str, owd: &str) -> String {
    let delivery = kind.starts_with("application") || kind.starts_with("transport");
    match owd {
        _ if !delivery => format!("{kind} latency"),
        "none" => format!("{kind} latency (one-way delay included)"),
        "min-observed" => format!("{kind} latency above min OWD"),
        "drift-corrected" => format!("{kind} latency above min OWD (drift-corrected)"),
        given => format!("{kind} latency above a one-way delay of {given}"),
    }
}

fn tick(x: &f64) -> String {
    if x.abs() >= 20.0 || *x == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The chart every plot uses: caption, margins, both axes described, tick
/// labels, at most two light grid lines per step.
fn chart<'a, 'b>(
    root: &'a Area<'b>,
    caption: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    (x_desc, y_desc): (&str, &str),
) -> Result<Chart<'a, 'b>, String> {
    let mut chart = ChartBuilder::on(root)
        .caption(caption, (FONT, 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .max_light_lines(2)
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The legend box, at `position`, labels in `font_size`.
fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, font_size))
        .draw()
        .map_err(err)
}

/// A line of `width` in colour `c`, labelled `label` in the legend.
fn line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    points: impl IntoIterator<Item = (f64, f64)>,
    c: RGBColor,
    width: u32,
    label: String,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new(points, c.stroke_width(width)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width)));
    Ok(())
}

/// Every plot the stored results allow.
pub fn plots(results: &Value) -> Vec<Plot> {
    let mut out = Vec::new();
    let scenario = results["scenario"].as_str().unwrap_or("");
    let kind = results["latency"].as_str().unwrap_or("application");
    let owd = results["owd"].as_str().unwrap_or("min-observed");
    let vars = available(results);
    if vars.is_empty() {
        return out;
    }
    let ccdf_log = results["plots"]["ccdf_log"].as_bool() == Some(true);
    // Latency per retransmission number: the main kind, then `also` kinds.
    let main: Vec<(String, &Value)> = vars
        .iter()
        .map(|v| (name(v), &v["by_retransmissions"]))
        .collect();
    out.extend(rtx_plot(
        "latency-by-rtx.svg",
        &format!(
            "{scenario}: {} by retransmission number",
            latency_name(kind, owd)
        ),
        &latency_label(kind, owd),
        &main,
    ));
    let mut also_kinds: Vec<String> = vars
        .iter()
        .filter_map(|v| v["also"].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    also_kinds.sort();
    also_kinds.dedup();
    for k in &also_kinds {
        let rows: Vec<(String, &Value)> = vars
            .iter()
            .map(|v| (name(v), &v["also"][k.as_str()]["by_retransmissions"]))
            .collect();
        out.extend(rtx_plot(
            &format!("{k}-latency-by-rtx.svg"),
            &format!(
                "{scenario}: {} by retransmission number",
                latency_name(k, owd)
            ),
            &latency_label(k, owd),
            &rows,
        ));
    }
    // CDFs.
    for (k, key) in std::iter::once((kind.to_string(), None))
        .chain(also_kinds.iter().map(|k| (k.clone(), Some(k.clone()))))
    {
        let series: Vec<(String, Vec<(f64, f64)>)> = vars
            .iter()
            .map(|v| {
                let cdf = match &key {
                    None => &v["latency_cdf_ms"],
                    Some(k) => &v["also"][k.as_str()]["latency_cdf_ms"],
                };
                (name(v), cdf_points(cdf))
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let prefix = if key.is_none() {
            String::new()
        } else {
            format!("{k}-")
        };
        let label = latency_label(&k, owd);
        let title = latency_name(&k, owd);
        out.extend(cdf_plot(
            &format!("{prefix}latency-cdf.svg"),
            &format!("{scenario}: CDF of {title}"),
            &label,
            &series,
            false,
        ));
        out.extend(cdf_plot(
            &format!("{prefix}latency-cdf-tail.svg"),
            &format!("{scenario}: CDF tail (90th percentile and up) of {title}"),
            &label,
            &series,
            true,
        ));
        if ccdf_log {
            out.extend(ccdf_plot(
                &format!("{prefix}latency-ccdf.svg"),
                &format!("{scenario}: CCDF of {title} (log scale)"),
                &label,
                &series,
            ));
        }
    }
    // Echo response times (001 Fig. 6 plots the complementary CDF at
    // p = 1%); a sweep's are per point and not pooled here.
    if results["sweep"].is_null() {
        let series: Vec<(String, Vec<(f64, f64)>)> = vars
            .iter()
            .map(|v| (name(v), cdf_points(&v["responses"]["response_cdf_ms"])))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if !series.is_empty() && ccdf_log {
            out.extend(ccdf_plot(
                "response-ccdf.svg",
                &format!("{scenario}: CCDF of the response time (log scale)"),
                "response time (request sent -> echo delivered), ms",
                &series,
            ));
        }
        if !series.is_empty() {
            out.extend(cdf_plot(
                "response-cdf-tail.svg",
                &format!("{scenario}: CDF tail (90th percentile and up) of the response time"),
                "response time (request sent -> echo delivered), ms",
                &series,
                true,
            ));
        }
    }
    out.extend(points_plot(results, &vars, &latency_name(kind, owd)));
    out.extend(grid_plots(results, &vars, &latency_name(kind, owd)));
    out.extend(reduction_plots(results));
    out.extend(mtt_plot(results, &vars));
    out.extend(model_plot(results, &vars));
    out.extend(throughput_plot(results, &vars));
    out
}

/// Real against simulated runs of one scenario (the report's "Real sockets
/// vs the simulator"): per variant present in both, the box plot by
/// retransmission number of the summary latency kind, simulated and real
/// side by side. `sim` and `real` are the two stored `results.json` values.
pub fn real_vs_sim_plots(sim: &Value, real: &Value) -> Vec<Plot> {
    let scenario = sim["scenario"].as_str().unwrap_or("");
    let kind = sim["latency"].as_str().unwrap_or("application");
    let owd = sim["owd"].as_str().unwrap_or("min-observed");
    let real_vars = available(real);
    available(sim)
        .into_iter()
        .filter_map(|s| {
            let n = name(s);
            let r = real_vars.iter().find(|r| name(r) == n)?;
            rtx_plot(
                &format!("real-vs-sim-{}.svg", file_safe(&n)),
                &format!(
                    "{scenario}, {n}: {} by retransmission number, simulated and real",
                    latency_name(kind, owd)
                ),
                &latency_label(kind, owd),
                &[
                    ("simulated".to_string(), &s["by_retransmissions"]),
                    ("real sockets".to_string(), &r["by_retransmissions"]),
                ],
            )
        })
        .collect()
}

fn cdf_points(cdf: &Value) -> Vec<(f64, f64)> {
    cdf.as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["ms"].as_f64()?, p["q"].as_f64()?)))
        .collect()
}

fn nice_max(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        1.0
    } else {
        x * 1.08
    }
}

fn rtx_plot(file: &str, caption: &str, y_desc: &str, rows: &[(String, &Value)]) -> Option<Plot> {
    // (variant index, group, p50, p99, max, mean, count)
    let mut boxes = Vec::new();
    for (vi, (_, r)) in rows.iter().enumerate() {
        for row in r.as_array().into_iter().flatten() {
            let g = row["retransmissions"].as_u64()? as usize;
            if row["count"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            boxes.push((
                vi,
                g.min(3),
                row["p50_ms"].as_f64()?,
                row["p99_ms"].as_f64()?,
                row["max_ms"].as_f64()?,
                row["mean_ms"].as_f64()?,
            ));
        }
    }
    if boxes.is_empty() {
        return None;
    }
    let ymax = nice_max(boxes.iter().map(|b| b.4).fold(0.0, f64::max));
    let n = rows.len().max(1);
    let width = 0.8 / n as f64;
    draw(
        file,
        format!("{caption} (box: median to 99th percentile; whisker: to the maximum; dot: mean)"),
        |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(caption, (FONT, 17))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(64)
                .build_cartesian_2d(-0.5f64..3.5f64, 0f64..ymax)
                .map_err(err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(5)
                .x_label_formatter(&|x| match x.round() as i64 {
                    0 => "no retransmission".into(),
                    1 => "1st".into(),
                    2 => "2nd".into(),
                    3 => "3rd or later".into(),
                    _ => String::new(),
                })
                .x_desc("retransmissions of the message")
                .y_desc(y_desc)
                .y_label_formatter(&tick)
                .max_light_lines(2)
                .label_style((FONT, 13))
                .draw()
                .map_err(err)?;
            for (vi, (vname, _)) in rows.iter().enumerate() {
                let c = color(vi);
                let mine: Vec<_> = boxes.iter().filter(|b| b.0 == vi).collect();
                let offset = (vi as f64 - (n as f64 - 1.0) / 2.0) * width;
                let half = width * 0.35;
                chart
                    .draw_series(mine.iter().map(|b| {
                        let x = b.1 as f64 + offset;
                        Rectangle::new([(x - half, b.2), (x + half, b.3)], c.mix(0.35).filled())
                    }))
                    .map_err(err)?
                    .label(vname.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
                    });
                chart
                    .draw_series(mine.iter().map(|b| {
                        let x = b.1 as f64 + offset;
                        Rectangle::new([(x - half, b.2), (x + half, b.3)], c.stroke_width(1))
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(mine.iter().map(|b| {
                        let x = b.1 as f64 + offset;
                        PathElement::new(vec![(x, b.3), (x, b.4)], c.stroke_width(1))
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(mine.iter().map(|b| {
                        let x = b.1 as f64 + offset;
                        PathElement::new(vec![(x - half, b.4), (x + half, b.4)], c.stroke_width(1))
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(mine.iter().map(|b| {
                        let x = b.1 as f64 + offset;
                        Circle::new((x, b.5), 3, c.filled())
                    }))
                    .map_err(err)?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)
        },
    )
}

/// Cuts a CDF at `xmax`, interpolating the crossing point.
fn clip_cdf(points: &[(f64, f64)], xmax: f64, ymin: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if out.is_empty() && a.0 <= xmax {
            out.push(a);
        }
        if b.0 <= xmax {
            out.push(b);
        } else {
            if a.0 < xmax {
                let t = (xmax - a.0) / (b.0 - a.0);
                out.push((xmax, a.1 + t * (b.1 - a.1)));
            }
            break;
        }
    }
    if points.len() == 1 && points[0].0 <= xmax {
        out.push(points[0]);
    }
    out.into_iter().filter(|p| p.1 >= ymin - 1e-12).collect()
}

fn quantile(points: &[(f64, f64)], q: f64) -> Option<f64> {
    points.iter().find(|p| p.1 >= q - 1e-12).map(|p| p.0)
}

fn cdf_plot(
    file: &str,
    caption: &str,
    x_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    tail: bool,
) -> Option<Plot> {
    let (ymin, cut) = if tail { (0.9, 0.9999) } else { (0.0, 0.999) };
    let xmax = nice_max(
        series
            .iter()
            .filter_map(|(_, p)| quantile(p, cut))
            .fold(0.0, f64::max),
    );
    let xmin = if tail {
        series
            .iter()
            .filter_map(|(_, p)| quantile(p, ymin))
            .fold(f64::INFINITY, f64::min)
            .min(xmax * 0.5)
            .max(0.0)
    } else {
        0.0
    };
    let note = if tail {
        "x axis cut at the largest 99.99th percentile"
    } else {
        "x axis cut at the largest 99.9th percentile"
    };
    draw(file, format!("{caption} ({note})"), |root| {
        let mut chart = chart(
            root,
            caption,
            xmin..xmax,
            ymin..1.0,
            (x_desc, "fraction of messages"),
        )?;
        for (i, (n, p)) in series.iter().enumerate() {
            let pts = clip_cdf(p, xmax, ymin)
                .into_iter()
                .map(|(x, y)| (x.max(xmin), y));
            line(&mut chart, pts, color(i), 2, n.clone())?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight, 13)
    })
}

/// Axes of the stored sweep (0 without one).
fn axis_count(results: &Value) -> usize {
    results["sweep"]["axes"].as_array().map_or(0, Vec::len)
}

fn mtt_plot(results: &Value, vars: &[&Value]) -> Option<Plot> {
    if axis_count(results) > 1 {
        return None;
    }
    let sweep = results["sweep"].as_object()?;
    if sweep.get("parameter")?.as_str()? != "drop-data-packet" {
        return None;
    }
    let scenario = results["scenario"].as_str().unwrap_or("");
    let mean = results["mtt_statistic"].as_str() == Some("mean");
    // (name, [(position, mtt, ci)])
    type MttSeries = (String, Vec<(f64, f64, Option<f64>)>);
    let series: Vec<MttSeries> = vars
        .iter()
        .map(|v| {
            let pts = v["points"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some((
                        p["value"].as_str()?.parse::<f64>().ok()?,
                        p["mtt_ms_compared"].as_f64()?,
                        p["mtt_ci95_ms"].as_f64(),
                    ))
                })
                .collect::<Vec<_>>();
            (name(v), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (xmin, xmax) = all
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let ymax = nice_max(all.map(|p| p.1 + p.2.unwrap_or(0.0)).fold(0.0, f64::max));
    let stat = if mean {
        "mean with 95% confidence interval"
    } else {
        "median"
    };
    let caption = format!("{scenario}: MTT of the message hit by the drop ({stat})");
    draw("mtt.svg", caption.clone(), |root| {
        let mut chart = chart(
            root,
            &caption,
            (xmin - 1.0)..(xmax + 1.0),
            0.0..ymax,
            (
                "position of the dropped data packet",
                "message transfer time, ms",
            ),
        )?;
        for (i, (n, p)) in series.iter().enumerate() {
            let c = color(i);
            line(&mut chart, p.iter().map(|x| (x.0, x.1)), c, 2, n.clone())?;
            chart
                .draw_series(p.iter().map(|x| Circle::new((x.0, x.1), 3, c.filled())))
                .map_err(err)?;
            chart
                .draw_series(p.iter().filter_map(|x| {
                    let h = x.2?;
                    Some(PathElement::new(
                        vec![(x.0, x.1 - h), (x.0, x.1 + h)],
                        c.stroke_width(1),
                    ))
                }))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)
    })
}

fn model_plot(results: &Value, vars: &[&Value]) -> Option<Plot> {
    let scenario = results["scenario"].as_str().unwrap_or("");
    // A delay sweep changes the RTT, not the loss: one curve against loss
    // does not describe it.
    let sweep = results["sweep"]["parameter"].as_str();
    if axis_count(results) > 1 {
        return None;
    }
    if sweep == Some("iat") {
        return load_plot(results, vars);
    }
    if sweep.is_some_and(|p| p != "loss") {
        return None;
    }
    // (name, curve, measured (loss %, mean response) per point or overall)
    type ModelSeries = (String, Vec<(f64, f64)>, Vec<(f64, f64)>);
    let measured = |x: &Value| {
        x["model"]["loss"]
            .as_f64()
            .zip(x["responses"]["response_ms"]["mean"].as_f64())
            .map(|(l, r)| (l * 100.0, r))
    };
    let series: Vec<ModelSeries> = vars
        .iter()
        .filter_map(|v| {
            let points: Vec<&Value> = v["points"].as_array().into_iter().flatten().collect();
            // The curve is the same at every point of a loss sweep.
            let m = if v["model"].is_object() {
                &v["model"]
            } else {
                &points.iter().find(|p| p["model"].is_object())?["model"]
            };
            let curve: Vec<(f64, f64)> = m["curve"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some((p["loss"].as_f64()? * 100.0, p["response_time_ms"].as_f64()?))
                })
                .collect();
            let dots: Vec<(f64, f64)> = if points.is_empty() {
                measured(v).into_iter().collect()
            } else {
                points.iter().filter_map(|p| measured(p)).collect()
            };
            Some((name(v), curve, dots))
        })
        .filter(|(_, c, _)| !c.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().chain(s.2.iter()).map(|p| p.0))
        .fold(0.0, f64::max)
        .max(0.1);
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|s| s.1.iter().chain(s.2.iter()).map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let caption =
        format!("{scenario}: mean response time vs loss (lines: model eq. 5; dots: ours)");
    draw("response-vs-loss.svg", caption.clone(), |root| {
        let mut chart = chart(
            root,
            &caption,
            0.0..xmax,
            0.0..ymax,
            ("loss rate, %", "mean response time, ms"),
        )?;
        for (i, (n, curve, measured)) in series.iter().enumerate() {
            let c = color(i);
            line(
                &mut chart,
                curve.iter().copied(),
                c,
                2,
                format!("{n} (model)"),
            )?;
            chart
                .draw_series(measured.iter().map(|m| Circle::new(*m, 5, c.filled())))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)
    })
}

/// A sweep value as a number for an x axis: `2.5%` → 2.5, `25ms` → 25,
/// `1s` → 1000 (milliseconds), `500us` → 0.5.
fn point_number(label: &str) -> Option<f64> {
    let l = label.trim();
    if let Some(x) = l.strip_suffix('%') {
        return x.parse().ok();
    }
    // Rates in kbit/s.
    if let Some(x) = l.strip_suffix("kbit") {
        return x.parse().ok();
    }
    if let Some(x) = l.strip_suffix("bit") {
        return x.parse::<f64>().ok().map(|b| b / 1000.0);
    }
    for (unit, ms) in [
        ("us", 0.001),
        ("ms", 1.0),
        ("s", 1000.0),
        ("m", 60_000.0),
        ("h", 3_600_000.0),
    ] {
        if let Some(x) = l.strip_suffix(unit) {
            if let Ok(v) = x.parse::<f64>() {
                return Some(v * ms);
            }
        }
    }
    l.parse().ok()
}

/// Loss, delay and load sweeps: one number per point and variant, so the
/// pooled tables do not hide the sweep: goodput (mean of the throughput
/// intervals of the first `[[flows]]` entry) when the scenario measures
/// throughput, else the main latency's 99th percentile.
fn points_plot(results: &Value, vars: &[&Value], latency: &str) -> Option<Plot> {
    let scenario = results["scenario"].as_str().unwrap_or("");
    let parameter = results["sweep"]["parameter"].as_str()?;
    if parameter == "drop-data-packet" || axis_count(results) > 1 {
        return None;
    }
    let goodput = vars.iter().any(|v| {
        v["points"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["throughput"].is_array())
    });
    let series: Vec<(String, Vec<(f64, f64)>)> = vars
        .iter()
        .map(|v| {
            let pts = v["points"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let x = point_number(p["value"].as_str()?)?;
                    let y = if goodput {
                        p["throughput"][0]["aggregate_kbps_mean"].as_f64()?
                    } else {
                        p["summary"]["latency_ms"]["p99"].as_f64()?
                    };
                    Some((x, y))
                })
                .collect::<Vec<_>>();
            (name(v), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    let unit = axis_unit(parameter);
    let (file, what, y_desc) = if goodput {
        (
            "goodput-per-point.svg",
            "goodput (acknowledged bytes, mean over the intervals)".to_string(),
            "kbit/s".to_string(),
        )
    } else {
        (
            "p99-per-point.svg",
            format!("99th percentile of {latency}"),
            "ms".to_string(),
        )
    };
    let all = || series.iter().flat_map(|s| s.1.iter());
    let xmax = all().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let ymax = nice_max(all().map(|p| p.1).fold(0.0, f64::max));
    let caption = format!("{scenario}: {what} per {parameter} point");
    draw(file, caption.clone(), |root| {
        let mut chart = chart(root, &caption, 0.0..xmax * 1.05, 0.0..ymax, (unit, &y_desc))?;
        for (i, (n, pts)) in series.iter().enumerate() {
            let c = color(i);
            let mut pts = pts.clone();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            line(&mut chart, pts.iter().copied(), c, 2, n.clone())?;
            chart
                .draw_series(pts.iter().map(|m| Circle::new(*m, 4, c.filled())))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)
    })
}

/// The x-axis title of a sweep parameter.
fn axis_unit(parameter: &str) -> &str {
    match parameter {
        "loss" => "loss rate, %",
        "delay" => "one-way delay, ms",
        "iat" => "(mean) interval between messages, ms",
        "rate" => "bottleneck rate, kbit/s",
        "flows" => "flows",
        "drop-data-packet" => "position of the dropped data packet",
        _ => parameter,
    }
}

/// A line per value of the first axis against the last: `(label, [(x, y,
/// error half-width)])`, and the draw. Shared by the grid plots.
type GridSeries = Vec<(String, Vec<(f64, f64, Option<f64>)>)>;

fn grid_chart(
    file: &str,
    title: &str,
    caption: String,
    x_desc: &str,
    y_desc: &str,
    series: &GridSeries,
    y_from_zero: bool,
) -> Option<Plot> {
    let all = || series.iter().flat_map(|s| s.1.iter());
    all().next()?;
    let (xmin, xmax) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    let pad = ((xmax - xmin) * 0.05).max(0.5);
    let ytop = all().map(|p| p.1 + p.2.unwrap_or(0.0)).fold(0.0, f64::max);
    let ybot = all()
        .map(|p| p.1 - p.2.unwrap_or(0.0))
        .fold(0.0f64, f64::min);
    let (y0, y1) = if y_from_zero {
        (ybot.min(0.0) * 1.08, nice_max(ytop))
    } else {
        (ybot, nice_max(ytop))
    };
    draw(file, caption, |root| {
        let mut chart = chart(
            root,
            title,
            (xmin - pad)..(xmax + pad),
            y0..y1,
            (x_desc, y_desc),
        )?;
        for (i, (n, pts)) in series.iter().enumerate() {
            let c = color(i);
            let mut pts = pts.clone();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            line(&mut chart, pts.iter().map(|p| (p.0, p.1)), c, 2, n.clone())?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4, c.filled())))
                .map_err(err)?;
            // Error bars with caps.
            let w = (xmax - xmin).max(1.0) * 0.008;
            chart
                .draw_series(pts.iter().filter_map(|p| {
                    let h = p.2?;
                    Some(PathElement::new(
                        vec![(p.0, p.1 - h), (p.0, p.1 + h)],
                        c.stroke_width(1),
                    ))
                }))
                .map_err(err)?;
            for sign in [-1.0, 1.0] {
                chart
                    .draw_series(pts.iter().filter_map(|p| {
                        let y = p.1 + sign * p.2?;
                        Some(PathElement::new(
                            vec![(p.0 - w, y), (p.0 + w, y)],
                            c.stroke_width(1),
                        ))
                    }))
                    .map_err(err)?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 12)
    })
}

/// Sweeps with two axes and no drop position (002 Table 5.1's RTT × IAT
/// matrix): per variant, the main latency's 99th percentile against the
/// second axis, one line per value of the first.
fn grid_plots(results: &Value, vars: &[&Value], latency: &str) -> Vec<Plot> {
    let axes: Vec<&str> = results["sweep"]["axes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["parameter"].as_str())
        .collect();
    if axes.len() != 2 || axes.contains(&"drop-data-packet") {
        return Vec::new();
    }
    let scenario = results["scenario"].as_str().unwrap_or("");
    let mut out = Vec::new();
    for v in vars {
        let mut series: GridSeries = Vec::new();
        for p in v["points"].as_array().into_iter().flatten() {
            let coords: Vec<&str> = p["coords"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let (Some(outer), Some(x)) = (coords.first(), coords.get(1)) else {
                continue;
            };
            let (Some(x), Some(y)) = (point_number(x), p["summary"]["latency_ms"]["p99"].as_f64())
            else {
                continue;
            };
            let label = format!("{} {outer}", axes[0]);
            match series.iter_mut().find(|s| s.0 == label) {
                Some(s) => s.1.push((x, y, None)),
                None => series.push((label, vec![(x, y, None)])),
            }
        }
        let caption = format!(
            "{scenario}, {}: 99th percentile of {latency} per {} and {}",
            name(v),
            axes[0],
            axes[1]
        );
        out.extend(grid_chart(
            &format!("grid-p99-{}.svg", file_safe(&name(v))),
            &format!("{scenario}, {}: 99th percentile", name(v)),
            caption,
            axis_unit(axes[1]),
            "99th percentile, ms",
            &series,
            true,
        ));
    }
    out
}

/// A variant name usable in a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Drop-position sweeps inside a grid (003 Figs. 3, 5, 7, 8, 10, 11): per
/// variant against the baseline, the average MTT reduction against the last
/// other axis (delay), one line per value of the first (bandwidth), with
/// 95% confidence intervals over repetitions when there are any.
fn reduction_plots(results: &Value) -> Vec<Plot> {
    let scenario = results["scenario"].as_str().unwrap_or("");
    let mut out = Vec::new();
    let with_ci = results["mtt_statistic"].as_str() == Some("mean");
    for (vname, red) in results["mtt_reduction"].as_object().into_iter().flatten() {
        let cells = red["cells"].as_array().into_iter().flatten();
        let mut series: GridSeries = Vec::new();
        for c in cells {
            let coords: Vec<&str> = c["coords"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let Some(x) = coords.last().and_then(|x| point_number(x)) else {
                continue;
            };
            let (y, h) = (
                c["mean"].as_f64(),
                if with_ci { c["ci95"].as_f64() } else { None },
            );
            let Some(y) = y else { continue };
            let label = if coords.len() > 1 {
                coords[..coords.len() - 1].join("/")
            } else {
                String::from("all")
            };
            let point = (x, y * 100.0, h.map(|h| h * 100.0));
            match series.iter_mut().find(|s| s.0 == label) {
                Some(s) => s.1.push(point),
                None => series.push((label, vec![point])),
            }
        }
        if series.is_empty() {
            continue;
        }
        let axes: Vec<&str> = results["sweep"]["axes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["parameter"].as_str())
            .filter(|p| *p != "drop-data-packet")
            .collect();
        let x_axis = axes.last().copied().unwrap_or("");
        let stat = if with_ci {
            "MTT mean over repetitions, reduction averaged over positions, 95% confidence interval (jackknife over repetitions)"
        } else {
            "MTT median over repetitions, reduction averaged over positions"
        };
        let caption = format!(
            "{scenario}: average MTT reduction of {vname} vs {} per {} ({stat})",
            red["baseline"].as_str().unwrap_or("?"),
            axes.join(" and ")
        );
        out.extend(grid_chart(
            &format!("mtt-reduction-{}.svg", file_safe(vname)),
            &format!(
                "{scenario}: MTT reduction, {vname} vs {}",
                red["baseline"].as_str().unwrap_or("?")
            ),
            caption,
            axis_unit(x_axis),
            "average MTT reduction, %",
            &series,
            true,
        ));
    }
    out
}

/// Complementary CDFs, `P(X > x)`, on a log y axis from 1 to 10⁻⁴ (001
/// Fig. 6): each stored quantile `q` at `ms` is the point `(ms, 1 − q)`.
fn ccdf_plot(
    file: &str,
    caption: &str,
    x_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Option<Plot> {
    const FLOOR: f64 = -4.0;
    let lines: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, p)| {
            let pts: Vec<(f64, f64)> = p
                .iter()
                .filter(|(_, q)| 1.0 - q > 1e-9)
                .map(|(x, q)| (*x, (1.0 - q).log10().max(FLOOR)))
                .collect();
            (n.clone(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let xmax = nice_max(
        lines
            .iter()
            .flat_map(|(_, p)| p.iter().map(|x| x.0))
            .fold(0.0, f64::max),
    );
    let caption_full =
        format!("{caption} (y: P(X > x), log scale, down to the 99.99th percentile)");
    draw(file, caption_full, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FONT, 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..xmax, FLOOR..0.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("P(X > x)")
            .x_label_formatter(&tick)
            .y_labels(5)
            .y_label_formatter(&|y| {
                let e = y.round() as i32;
                if (y - f64::from(e)).abs() > 1e-6 {
                    String::new()
                } else if e == 0 {
                    "1".into()
                } else {
                    format!("1e{e}")
                }
            })
            .max_light_lines(2)
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        for (i, (n, p)) in lines.iter().enumerate() {
            line(&mut chart, p.iter().copied(), color(i), 2, n.clone())?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 13)
    })
}

/// Mean response time against the offered load (an `iat` sweep; 001
/// Figs. 7-8): the model per point as a line, ours as dots, log x axis.
fn load_plot(results: &Value, vars: &[&Value]) -> Option<Plot> {
    let scenario = results["scenario"].as_str().unwrap_or("");
    // (name, model [(log10 rate, ms)], ours [(log10 rate, ms)])
    type LoadSeries = (String, Vec<(f64, f64)>, Vec<(f64, f64)>);
    let series: Vec<LoadSeries> = vars
        .iter()
        .map(|v| {
            let (mut model, mut ours) = (Vec::new(), Vec::new());
            for p in v["points"].as_array().into_iter().flatten() {
                let Some(iat) = p["model"]["interarrival_ms"].as_f64().filter(|x| *x > 0.0) else {
                    continue;
                };
                let x = (1000.0 / iat).log10();
                if let Some(m) = p["model"]["response_time_ms"].as_f64() {
                    model.push((x, m));
                }
                if let Some(r) = p["responses"]["response_ms"]["mean"].as_f64() {
                    ours.push((x, r));
                }
            }
            (name(v), model, ours)
        })
        .filter(|(_, m, o)| !m.is_empty() || !o.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    let xs = || {
        series
            .iter()
            .flat_map(|s| s.1.iter().chain(s.2.iter()).map(|p| p.0))
    };
    let (x0, x1) = (
        xs().fold(f64::INFINITY, f64::min).floor(),
        xs().fold(f64::NEG_INFINITY, f64::max).ceil(),
    );
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|s| s.1.iter().chain(s.2.iter()).map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let caption =
        format!("{scenario}: mean response time vs offered load (lines: model eq. 5; dots: ours)");
    draw("response-vs-load.svg", caption.clone(), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(&caption, (FONT, 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1.max(x0 + 1.0), 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("requests per second, all streams or connections together (log scale)")
            .y_desc("mean response time, ms")
            .x_labels(((x1 - x0) as usize + 1).max(2))
            .x_label_formatter(&|x| tick(&10f64.powf(*x)))
            .y_label_formatter(&tick)
            .max_light_lines(2)
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        for (i, (n, model, ours)) in series.iter().enumerate() {
            let c = color(i);
            line(
                &mut chart,
                model.iter().copied(),
                c,
                2,
                format!("{n} (model)"),
            )?;
            chart
                .draw_series(ours.iter().map(|m| Circle::new(*m, 5, c.filled())))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 13)
    })
}

fn throughput_plot(results: &Value, vars: &[&Value]) -> Option<Plot> {
    let scenario = results["scenario"].as_str().unwrap_or("");
    // (label, variant index, entry, [(t, kbps)])
    let mut series = Vec::new();
    let mut interval = 0.0;
    for (vi, v) in vars.iter().enumerate() {
        for t in v["throughput"].as_array().into_iter().flatten() {
            let iv = t["interval_s"].as_f64().unwrap_or(1.0);
            interval = iv;
            let pts: Vec<(f64, f64)> = t["aggregate_kbps"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, x)| Some(((i as f64 + 1.0) * iv, x.as_f64()?)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let entry = t["entry"].as_u64().unwrap_or(0);
            let label = format!(
                "{}: entry {entry} ({} flows, {})",
                name(v),
                t["flows"],
                t["workload"].as_str().unwrap_or("")
            );
            series.push((label, vi, entry, pts));
        }
    }
    if series.is_empty() {
        return None;
    }
    let xmax = series
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let caption = format!("{scenario}: aggregate throughput per {interval:.0} s interval");
    draw("throughput.svg", caption.clone(), |root| {
        let mut chart = chart(
            root,
            &caption,
            0.0..xmax * 1.02,
            0.0..ymax * 1.6,
            (
                "end of interval, s after the window opens (repetitions one after another)",
                "throughput, kbit/s",
            ),
        )?;
        for (label, vi, entry, pts) in &series {
            let c = color(*vi);
            let w = if *entry == 0 { 2 } else { 1 };
            line(&mut chart, pts.iter().copied(), c, w, label.clone())?;
            if *entry > 0 {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 2, c.filled())))
                    .map_err(err)?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 11)
    })
}
