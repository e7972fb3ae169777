//! `netaware matrix`: the measured pairs, for people (a table, printed as
//! the pages come for `-o json`), or drawn as a heat map.

use super::{NetworkArg, Target};
use crate::output::{Format, OutputArgs};
use crate::{heatmap, json, render};

/// The flags of `matrix`.
#[derive(Debug, clap::Args)]
pub struct MatrixArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    /// Only this zone: its nodes and the pairs between them.
    #[arg(long)]
    zone: Option<String>,
    /// Only this node: it, its peers and its pairs both ways.
    #[arg(long)]
    node: Option<String>,
    #[command(flatten)]
    network: NetworkArg,
    /// Draw the pairs as a heat map in this format (to --file) instead of
    /// printing them.
    #[arg(long, value_enum, requires = "file")]
    format: Option<heatmap::ImageFormat>,
    /// What the heat map's cells show.
    #[arg(long, value_enum, default_value = "quality")]
    metric: heatmap::Metric,
    /// The heat map's file.
    #[arg(short, long, requires = "format")]
    file: Option<std::path::PathBuf>,
}

/// Prints or draws the matrix.
pub async fn run(args: MatrixArgs) -> anyhow::Result<()> {
    let mut title = match (&args.zone, &args.node) {
        (Some(zone), _) => format!("zone {zone}"),
        (None, Some(node)) => format!("node {node}"),
        (None, None) => "all nodes".to_owned(),
    };
    let network = &args.network.network;
    if !network.is_primary() {
        title = format!("{title}, network {network}");
    }
    let request = netaware_proto::v1::MatrixRequest {
        zone: args.zone.clone().unwrap_or_default(),
        node: args.node.clone().unwrap_or_default(),
        network: netaware_proto::convert::network_to_wire(network),
        ..Default::default()
    };
    let mut scores = args.target.connect().await?;
    if let (Some(format), Some(file)) = (args.format, &args.file) {
        let matrix = scores.matrix_of(&request).await?;
        heatmap::write(&matrix, args.metric, format, &title, file)?;
        eprintln!("wrote {}", file.display());
        return Ok(());
    }
    match args.output.format() {
        Format::Json => {
            // Streamed: printed as the pages come, whatever the size.
            let mut writer =
                json::MatrixJsonWriter::new(std::io::BufWriter::new(std::io::stdout()));
            scores
                .matrix_pages(&request, |page| writer.page(&page))
                .await?;
            Ok(writer.finish()?)
        }
        _ => {
            let matrix = scores.matrix_of(&request).await?;
            let answer = json::MatrixJson::from(&matrix);
            args.output
                .print(&answer, |wide| render::matrix(&matrix, wide))
        }
    }
}
