//! PNG bar charts of the evaluation: one panel per group (a traffic
//! pattern, or the simulator's job completion times), one bar per policy
//! with its median or mean, and a tick at its p90.
//!
//! Text needs a font: DejaVu Sans, from the system (Debian's
//! fonts-dejavu-core, which scripts/test installs), as plotters finds no
//! fonts of its own without fontconfig.

use std::path::Path;

use anyhow::{Context, bail};
use plotters::prelude::*;

/// One bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What the bar is.
    pub label: String,
    /// Its height.
    pub value: f64,
    /// Where the tick goes (p90), if any.
    pub upper: Option<f64>,
}

/// One panel: a title and its bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The panel's title.
    pub title: String,
    /// Its bars, left to right.
    pub bars: Vec<Bar>,
}

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn register_font() -> anyhow::Result<()> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let path = FONT_PATHS
                .iter()
                .find(|p| Path::new(p).exists())
                .ok_or_else(|| {
                    format!(
                        "no DejaVu Sans font (looked at {FONT_PATHS:?}); install fonts-dejavu-core"
                    )
                })?;
            let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path}: not a font plotters can read"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// Draws `panels` side by side into the PNG at `path`.
pub fn bar_chart(path: &Path, title: &str, y_label: &str, panels: &[Panel]) -> anyhow::Result<()> {
    if panels.is_empty() || panels.iter().any(|p| p.bars.is_empty()) {
        bail!("nothing to plot");
    }
    register_font()?;
    let width = 420 * panels.len() as u32 + 60;
    let root = BitMapBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let areas = root.split_evenly((1, panels.len()));
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(255, 127, 14),
        RGBColor(127, 127, 127),
    ];
    for (area, panel) in areas.iter().zip(panels) {
        let top = panel
            .bars
            .iter()
            .map(|b| b.upper.unwrap_or(b.value).max(b.value))
            .fold(0.0, f64::max)
            * 1.15;
        let labels: Vec<String> = panel.bars.iter().map(|b| b.label.clone()).collect();
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0..panel.bars.len() - 1).into_segmented(),
                0.0..top.max(f64::MIN_POSITIVE),
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(y_label)
            .x_labels(panel.bars.len())
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, bar) in panel.bars.iter().enumerate() {
            let color = palette[i % palette.len()];
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), bar.value),
                ],
                color.mix(0.8).filled(),
            )))?;
            // The p90 as a tick across the bar: above the bar, or inside it
            // when a heavy tail puts the mean above the p90.
            if let Some(upper) = bar.upper {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![
                        (SegmentValue::Exact(i), upper),
                        (SegmentValue::Exact(i + 1), upper),
                    ],
                    BLACK.stroke_width(3),
                )))?;
            }
            chart.draw_series(std::iter::once(Text::new(
                format!("{:.2}", bar.value),
                (SegmentValue::Exact(i), bar.value + top * 0.04),
                ("sans-serif", 13).into_font().color(&BLACK),
            )))?;
        }
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
