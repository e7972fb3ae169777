//! The pairs of a zone (or any set of nodes) as a heat map, the way
//! people look at Goldpinger's graph: a row per probing node, a column per
//! probed node, each cell coloured by the pair's RTT, loss, goodput or
//! quality. Drawn as SVG (with the node names and a legend) or PNG (the
//! cells alone, for a chat or a ticket) by `netaware matrix --format`, and
//! sent as cells to the collector's web view, which paints the same
//! colours.
//!
//! Pure: a wire matrix (and, for RTT, the estimates of the pairs nobody
//! probes) in, cells and bytes out. Colours run from green (good) through
//! yellow to red (bad); an estimated cell is marked as such (paler, and
//! said in its tooltip); a pair with no figure is grey, a node and itself
//! dark grey.

use std::collections::HashMap;
use std::fmt::Write;

use netaware_core::fault_kind::FaultKind;
use netaware_core::pair_rtt::RttBasis;
use netaware_proto::convert::rtt_basis_from_wire;
use netaware_proto::v1 as pb;
use serde::{Deserialize, Serialize};

/// What the cells show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// The pair's quality, 0 (red) to 1 (green).
    #[default]
    Quality,
    /// The median RTT, from the map's lowest (green) to its highest (red);
    /// a pair nobody probes shows its estimate.
    Rtt,
    /// The loss ratio, 0 (green) to 5% and over (red).
    Loss,
    /// The last goodput, from the map's highest (green) to none (red).
    Goodput,
}

impl Metric {
    /// Every metric, in the order a chooser lists them.
    pub const ALL: [Metric; 4] = [Metric::Quality, Metric::Rtt, Metric::Loss, Metric::Goodput];

    /// Its name, for titles.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Quality => "quality",
            Metric::Rtt => "median RTT",
            Metric::Loss => "loss",
            Metric::Goodput => "goodput",
        }
    }

    /// Its name on a command line and in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Quality => "quality",
            Metric::Rtt => "rtt",
            Metric::Loss => "loss",
            Metric::Goodput => "goodput",
        }
    }

    /// The metric named `name` (as [`Metric::as_str`] says it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// The pair's figure this metric shows.
    fn value(self, pair: &pb::Pair) -> Option<f64> {
        match self {
            Metric::Quality => Some(pair.quality),
            Metric::Rtt => pair.rtt_median_ms,
            Metric::Loss => pair.loss_ratio,
            Metric::Goodput => pair.throughput_bps,
        }
    }
}

/// The file a heat map is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ImageFormat {
    /// PNG: the cells alone.
    Png,
    /// SVG: the cells, the node names and a legend.
    Svg,
}

/// Why writing a heat map failed.
#[derive(Debug)]
pub enum WriteError {
    /// The PNG encoder failed.
    Png(png::EncodingError),
    /// The file could not be written.
    Io(std::path::PathBuf, std::io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Png(err) => write!(f, "encoding the PNG: {err}"),
            WriteError::Io(path, err) => write!(f, "writing {}: {err}", path.display()),
        }
    }
}

impl std::error::Error for WriteError {}

/// Writes the heat map of `matrix` to `path`.
pub fn write(
    matrix: &pb::Matrix,
    metric: Metric,
    format: ImageFormat,
    title: &str,
    path: &std::path::Path,
) -> Result<(), WriteError> {
    let map = HeatMap::of(matrix, metric);
    let bytes = match format {
        ImageFormat::Png => map.to_png().map_err(WriteError::Png)?,
        ImageFormat::Svg => map
            .to_svg(&format!("netaware: {title}, {}", metric.name()))
            .into_bytes(),
    };
    std::fs::write(path, bytes).map_err(|err| WriteError::Io(path.to_owned(), err))
}

/// Loss at and above which a cell is all red.
pub const LOSS_RED: f64 = 0.05;
/// Largest side of a PNG, in pixels: cells shrink to fit.
pub const MAX_PNG_SIDE: usize = 4096;
/// Side of a cell when there is room.
const CELL: usize = 24;

/// An RGB colour.
pub type Rgb = [u8; 3];
/// A pair with no figure.
pub const MISSING: Rgb = [190, 190, 190];
/// A node and itself.
pub const DIAGONAL: Rgb = [70, 70, 70];

/// What a cell's colour rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellBasis {
    /// The pair's own measurement.
    Measured,
    /// An estimate (network coordinates, or the zone's average): nobody
    /// probes the pair.
    Estimated,
    /// No figure.
    Missing,
    /// A node and itself.
    Itself,
}

/// One cell: its colour and what it rests on. On the wire (the web
/// view's JSON) a pair `["#rrggbb", "measured"]` of the colour drawn,
/// small enough for the tens of thousands of cells of a block's map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// Its colour.
    pub colour: Rgb,
    /// What the colour rests on.
    pub basis: CellBasis,
}

impl Cell {
    const MISSING: Cell = Cell {
        colour: MISSING,
        basis: CellBasis::Missing,
    };
    const ITSELF: Cell = Cell {
        colour: DIAGONAL,
        basis: CellBasis::Itself,
    };

    /// The colour drawn: an estimate's paler (halfway to white), so that
    /// it never passes for a measurement.
    pub fn drawn(&self) -> Rgb {
        match self.basis {
            CellBasis::Estimated => self.colour.map(|c| c / 2 + 128),
            _ => self.colour,
        }
    }
}

/// A cell on the wire: the colour drawn (an estimate's paler, as in the
/// SVG and PNG) and what it rests on.
impl Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let [r, g, b] = self.drawn();
        (format!("#{r:02x}{g:02x}{b:02x}"), self.basis).serialize(serializer)
    }
}

/// The cells of the map: nodes, and each pair's cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatMap {
    /// What the cells show.
    pub metric: Metric,
    /// The nodes, rows and columns alike.
    pub nodes: Vec<String>,
    /// `cells[row][column]`.
    pub cells: Vec<Vec<Cell>>,
    /// What the colours mean, for the legend: (green end, red end).
    pub scale: (String, String),
    /// For each node, the open fault placement acts on that it is part
    /// of (its own NIC, or the bad uplink it sits behind), as a short text:
    /// its name is drawn in red with the fault as its tooltip.
    pub faults: Vec<Option<String>>,
}

/// The colour of a faulty node's name.
const FAULT_RED: &str = "rgb(200,30,30)";

/// Green (0) through yellow (0.5) to red (1).
pub fn colour(badness: f64) -> Rgb {
    let t = badness.clamp(0.0, 1.0);
    let (red, green) = if t < 0.5 {
        (t * 2.0, 1.0)
    } else {
        (1.0, (1.0 - t) * 2.0)
    };
    [(40.0 + 200.0 * red) as u8, (40.0 + 160.0 * green) as u8, 50]
}

/// How a metric's figures become badness in [0, 1] over one map.
struct Scale {
    metric: Metric,
    low: f64,
    high: f64,
}

impl Scale {
    /// The scale of `values`, the map's measured figures of `metric`.
    fn of(metric: Metric, values: impl Iterator<Item = f64>) -> Self {
        let (low, high) = values
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        Self { metric, low, high }
    }

    fn badness(&self, v: f64) -> f64 {
        let (low, high) = (self.low, self.high);
        match self.metric {
            Metric::Quality => 1.0 - v,
            Metric::Loss => v / LOSS_RED,
            // Log scale: a map of 0.1 ms pairs and 30 ms pairs shows both.
            Metric::Rtt if high > low => {
                ((v.max(low) / low.max(1e-3)).ln()) / ((high / low.max(1e-3)).ln())
            }
            Metric::Rtt => 0.0,
            Metric::Goodput if high > 0.0 => 1.0 - v / high,
            Metric::Goodput => 1.0,
        }
    }

    /// The legend: (green end, red end).
    fn legend(&self) -> (String, String) {
        let known = self.low.is_finite();
        match self.metric {
            Metric::Quality => ("quality 1".to_owned(), "quality 0".to_owned()),
            Metric::Loss => ("loss 0%".to_owned(), format!("loss {}%+", LOSS_RED * 100.0)),
            Metric::Rtt if known => (
                format!("{:.3} ms", self.low),
                format!("{:.3} ms", self.high),
            ),
            Metric::Goodput if known => (
                format!("{:.0} Mbit/s", self.high / 1e6),
                "0 Mbit/s".to_owned(),
            ),
            Metric::Rtt | Metric::Goodput => ("-".to_owned(), "-".to_owned()),
        }
    }
}

impl HeatMap {
    /// The map of `matrix`'s nodes, by name, and its measured pairs.
    pub fn of(matrix: &pb::Matrix, metric: Metric) -> Self {
        let mut nodes: Vec<String> = matrix.nodes.iter().map(|n| n.name.clone()).collect();
        nodes.sort();
        Self::of_nodes(matrix, metric, nodes, &[])
    }

    /// The map of `nodes`, in this order, from `matrix`'s pairs between
    /// them; with the RTT metric, a pair that `matrix` does not hold shows
    /// its estimate from `estimates` (as the Estimate call answers), marked
    /// as such. A pair whose figure is not finite has none.
    pub fn of_nodes(
        matrix: &pb::Matrix,
        metric: Metric,
        nodes: Vec<String>,
        estimates: &[pb::PairEstimate],
    ) -> Self {
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let ends = |src: &str, dst: &str| Some((*index.get(src)?, *index.get(dst)?));
        let in_map = || {
            matrix
                .pairs
                .iter()
                .filter(|p| ends(&p.src, &p.dst).is_some())
        };
        let scale = Scale::of(metric, in_map().filter_map(|p| metric.value(p)));
        let n = nodes.len();
        let mut cells = vec![vec![Cell::MISSING; n]; n];
        for (i, row) in cells.iter_mut().enumerate() {
            row[i] = Cell::ITSELF;
        }
        for pair in in_map() {
            let Some((src, dst)) = ends(&pair.src, &pair.dst) else {
                continue;
            };
            if let Some(v) = metric.value(pair).filter(|v| v.is_finite() && src != dst) {
                cells[src][dst] = Cell {
                    colour: colour(scale.badness(v)),
                    basis: CellBasis::Measured,
                };
            }
        }
        if metric == Metric::Rtt {
            for estimate in estimates {
                let Some((src, dst)) = ends(&estimate.src, &estimate.dst) else {
                    continue;
                };
                let estimated = !matches!(
                    rtt_basis_from_wire(estimate.basis),
                    RttBasis::Measured | RttBasis::Unknown
                );
                let rtt = estimate.rtt_ms.filter(|r| r.is_finite());
                if let (true, Some(rtt), CellBasis::Missing) =
                    (estimated, rtt, cells[src][dst].basis)
                {
                    cells[src][dst] = Cell {
                        colour: colour(scale.badness(rtt)),
                        basis: CellBasis::Estimated,
                    };
                }
            }
        }
        let mut faults = vec![None; n];
        for fault in &matrix.placement_faults {
            let what = match FaultKind::from_name(&fault.kind) {
                Some(FaultKind::Node) => format!("node fault: the node {}", fault_level(fault)),
                _ => format!(
                    "behind the bad uplink of block {} of {}, which {}",
                    fault.block,
                    fault.zones.join(", "),
                    fault_level(fault)
                ),
            };
            for node in &fault.nodes {
                if let Some(&i) = index.get(node.as_str()) {
                    faults[i].get_or_insert_with(|| what.clone());
                }
            }
        }
        Self {
            metric,
            nodes,
            cells,
            scale: scale.legend(),
            faults,
        }
    }

    /// The side of a cell in a PNG of this map.
    pub fn png_cell(&self) -> usize {
        (MAX_PNG_SIDE / self.nodes.len().max(1)).clamp(1, CELL)
    }

    /// The map as a PNG: the cells alone, `png_cell()` pixels each.
    pub fn to_png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let cell = self.png_cell();
        let side = (self.nodes.len() * cell).max(1);
        let mut pixels = vec![0u8; side * side * 3];
        for (row, cells) in self.cells.iter().enumerate() {
            for (column, drawn) in cells.iter().enumerate() {
                let rgb = drawn.drawn();
                for y in row * cell..(row + 1) * cell {
                    for x in column * cell..(column + 1) * cell {
                        let at = (y * side + x) * 3;
                        pixels[at..at + 3].copy_from_slice(&rgb);
                    }
                }
            }
        }
        let mut bytes = Vec::new();
        {
            let side = u32::try_from(side).unwrap_or(u32::MAX);
            let mut encoder = png::Encoder::new(&mut bytes, side, side);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header()?;
            writer.write_image_data(&pixels)?;
        }
        Ok(bytes)
    }

    /// The map as SVG, with the node names along both sides (rows probe,
    /// columns are probed) and a legend.
    pub fn to_svg(&self, title: &str) -> String {
        let n = self.nodes.len();
        let label = 8 * self.nodes.iter().map(String::len).max().unwrap_or(1) + 12;
        let (top, left) = (label + 30, label);
        let (width, height) = (left + n * CELL + 20, top + n * CELL + 50);
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            svg,
            r#"<rect width="{width}" height="{height}" fill="white"/><text x="4" y="16" font-size="14">{}</text>"#,
            escape(title)
        );
        for (i, name) in self.nodes.iter().enumerate() {
            let middle = i * CELL + CELL / 2 + 4;
            let (mark, tooltip) = match &self.faults[i] {
                Some(fault) => (
                    format!(r#" fill="{FAULT_RED}" font-weight="bold""#),
                    format!("<title>{}</title>", escape(fault)),
                ),
                None => (String::new(), String::new()),
            };
            let _ = writeln!(
                svg,
                r#"<text class="node" x="{}" y="{}" text-anchor="end"{mark}>{}{tooltip}</text>"#,
                left - 4,
                top + middle,
                escape(name)
            );
            let _ = writeln!(
                svg,
                r#"<text class="node" transform="translate({},{}) rotate(-90)"{mark}>{}{tooltip}</text>"#,
                left + middle,
                top - 4,
                escape(name)
            );
        }
        for (row, cells) in self.cells.iter().enumerate() {
            for (column, cell) in cells.iter().enumerate() {
                let [r, g, b] = cell.drawn();
                let estimated = if cell.basis == CellBasis::Estimated {
                    " (estimated)"
                } else {
                    ""
                };
                let _ = writeln!(
                    svg,
                    r#"<rect class="cell" x="{}" y="{}" width="{CELL}" height="{CELL}" fill="rgb({r},{g},{b})" stroke="white"><title>{} -&gt; {}{estimated}</title></rect>"#,
                    left + column * CELL,
                    top + row * CELL,
                    escape(&self.nodes[row]),
                    escape(&self.nodes[column])
                );
            }
        }
        let legend = top + n * CELL + 20;
        let ([gr, gg, gb], [rr, rg, rb]) = (colour(0.0), colour(1.0));
        let _ = writeln!(
            svg,
            r#"<rect x="{left}" y="{legend}" width="12" height="12" fill="rgb({gr},{gg},{gb})"/><text x="{}" y="{}">{}</text><rect x="{}" y="{legend}" width="12" height="12" fill="rgb({rr},{rg},{rb})"/><text x="{}" y="{}">{}</text>"#,
            left + 16,
            legend + 11,
            escape(&self.scale.0),
            left + 130,
            left + 146,
            legend + 11,
            escape(&self.scale.1)
        );
        if self.faults.iter().any(Option::is_some) {
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" fill="{FAULT_RED}" font-weight="bold">red names: a network fault (netaware faults)</text>"#,
                left + 280,
                legend + 11
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// How bad a fault is, for people.
fn fault_level(fault: &pb::Fault) -> String {
    crate::text::fault_effect(&fault.metric, fault.value)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(src: &str, dst: &str, rtt: f64, loss: f64) -> pb::Pair {
        pb::Pair {
            src: src.into(),
            dst: dst.into(),
            rtt_median_ms: Some(rtt),
            loss_ratio: Some(loss),
            quality: 1.0 - loss * 10.0,
            ..pb::Pair::default()
        }
    }

    fn matrix() -> pb::Matrix {
        let node = |name: &str| pb::Node {
            name: name.into(),
            zone: "zone-a".into(),
            ..pb::Node::default()
        };
        pb::Matrix {
            nodes: vec![node("c"), node("a"), node("b")],
            pairs: vec![
                pair("a", "b", 0.2, 0.0),
                pair("a", "c", 0.2, 0.08),
                pair("b", "a", 0.2, 0.0),
            ],
            ..pb::Matrix::default()
        }
    }

    /// The pixel at the centre of cell (row, column) of a decoded PNG.
    fn pixel(png_bytes: &[u8], cell: usize, row: usize, column: usize) -> Rgb {
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buffer = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buffer).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let side = info.width as usize;
        let (y, x) = (row * cell + cell / 2, column * cell + cell / 2);
        let at = (y * side + x) * 3;
        [buffer[at], buffer[at + 1], buffer[at + 2]]
    }

    #[test]
    fn a_lossy_pair_and_a_clean_one_differ_in_the_png() {
        let map = HeatMap::of(&matrix(), Metric::Loss);
        assert_eq!(map.nodes, ["a", "b", "c"]);
        let bytes = map.to_png().unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let cell = map.png_cell();
        let clean = pixel(&bytes, cell, 0, 1); // a -> b, no loss
        let lossy = pixel(&bytes, cell, 0, 2); // a -> c, 8% lost
        assert_eq!(clean, colour(0.0));
        assert_eq!(lossy, colour(1.0));
        assert_ne!(clean, lossy);
        assert_eq!(pixel(&bytes, cell, 1, 2), MISSING); // b -> c, never measured
        assert_eq!(pixel(&bytes, cell, 2, 2), DIAGONAL);
    }

    #[test]
    fn the_svg_names_every_node_and_has_a_cell_per_pair() {
        let svg = HeatMap::of(&matrix(), Metric::Quality).to_svg("zone-a <quality>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches(r#"class="cell""#).count(), 9);
        assert!(svg.contains("<title>a -&gt; c</title>"));
        assert!(svg.contains("zone-a &lt;quality&gt;"));
    }

    #[test]
    fn faulty_nodes_are_named_in_red_with_their_fault() {
        let clean = HeatMap::of(&matrix(), Metric::Loss).to_svg("t");
        assert!(!clean.contains(FAULT_RED));
        let mut m = matrix();
        m.placement_faults.push(pb::Fault {
            kind: "node".into(),
            nodes: vec!["c".into()],
            metric: "loss".into(),
            value: 0.08,
            ..pb::Fault::default()
        });
        let map = HeatMap::of(&m, Metric::Loss);
        assert_eq!(map.faults[0], None);
        assert_eq!(
            map.faults[2].as_deref(),
            Some("node fault: the node loses 8.00%")
        );
        let svg = map.to_svg("t");
        // Both of c's names, and the legend.
        assert_eq!(svg.matches(FAULT_RED).count(), 3);
        assert!(svg.contains("<title>node fault: the node loses 8.00%</title>"));
    }

    #[test]
    fn rtt_runs_from_the_lowest_to_the_highest_and_a_large_map_fits() {
        let mut m = matrix();
        m.pairs.push(pair("c", "a", 30.0, 0.0));
        let map = HeatMap::of(&m, Metric::Rtt);
        assert_eq!(map.cells[0][1].colour, colour(0.0));
        assert_eq!(map.cells[2][0].colour, colour(1.0));
        let many = pb::Matrix {
            nodes: (0..5000)
                .map(|i| pb::Node {
                    name: format!("n{i}"),
                    ..pb::Node::default()
                })
                .collect(),
            ..pb::Matrix::default()
        };
        let map = HeatMap::of(&many, Metric::Quality);
        assert!(map.png_cell() * 5000 <= MAX_PNG_SIDE.max(5000));
        assert_eq!(map.png_cell(), 1);
    }

    #[test]
    fn an_unprobed_pair_shows_its_estimate_paler_and_only_by_rtt() {
        let estimate = |src: &str, dst: &str, rtt: f64, basis: pb::RttBasis| pb::PairEstimate {
            src: src.into(),
            dst: dst.into(),
            rtt_ms: Some(rtt),
            basis: basis as i32,
            ..pb::PairEstimate::default()
        };
        let estimates = [
            estimate("b", "c", 0.2, pb::RttBasis::Estimated),
            // A measured pair's own figure wins over anything said of it.
            estimate("a", "b", 30.0, pb::RttBasis::Estimated),
            // An unknown RTT is no estimate.
            estimate("c", "b", 0.2, pb::RttBasis::Unknown),
            // Nodes outside the map are left out.
            estimate("b", "z", 0.2, pb::RttBasis::ZoneAverage),
        ];
        let nodes = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let map = HeatMap::of_nodes(&matrix(), Metric::Rtt, nodes.clone(), &estimates);
        assert_eq!(map.cells[1][2].basis, CellBasis::Estimated);
        assert_eq!(map.cells[1][2].colour, colour(0.0));
        assert_ne!(map.cells[1][2].drawn(), map.cells[1][2].colour);
        assert_eq!(map.cells[0][1].basis, CellBasis::Measured);
        assert_eq!(map.cells[2][1].basis, CellBasis::Missing);
        assert!(map.to_svg("t").contains("b -&gt; c (estimated)"));
        let by_loss = HeatMap::of_nodes(&matrix(), Metric::Loss, nodes, &estimates);
        assert_eq!(by_loss.cells[1][2].basis, CellBasis::Missing);
        // On the web view's wire: a colour and a basis.
        let json = serde_json::to_value(&map).unwrap();
        assert_eq!(
            json["cells"][1][2],
            serde_json::json!(["#94e499", "estimated"])
        );
        assert_eq!(json["cells"][0][1][1], "measured");
        assert_eq!(json["metric"], "rtt");
    }

    #[test]
    fn goodput_runs_from_the_best_to_none_and_a_missing_test_is_grey() {
        let mut m = matrix();
        m.pairs[0].throughput_bps = Some(100e6);
        m.pairs[2].throughput_bps = Some(25e6);
        let map = HeatMap::of(&m, Metric::Goodput);
        assert_eq!(map.cells[0][1].colour, colour(0.0)); // a -> b, the best
        assert_eq!(map.cells[1][0].colour, colour(0.75)); // b -> a, a quarter of it
        assert_eq!(map.cells[0][2].basis, CellBasis::Missing); // a -> c, never tested
        assert_eq!(map.scale, ("100 Mbit/s".to_owned(), "0 Mbit/s".to_owned()));
        assert_eq!(Metric::from_name("goodput"), Some(Metric::Goodput));
        assert_eq!(Metric::from_name("bandwidth"), None);
    }
}
