//! How a command prints its answer, as kubectl users expect: `-o table`
//! (for people, the default), `-o wide` (more columns), `-o json` or
//! `-o yaml` (for programs; the JSON contracts of docs/cli.md, the YAML the
//! same document). `--json` stays as the alias of `-o json`.

use serde::Serialize;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A table for people.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// JSON for programs.
    Json,
    /// The same document as YAML.
    Yaml,
}

/// The output flags of every command that prints.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct OutputArgs {
    /// Output format: table, wide (more columns), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// The same as `-o json`.
    #[arg(long, conflicts_with = "output")]
    pub json: bool,
}

impl OutputArgs {
    /// The format asked for.
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }

    /// Prints `value` for programs, or the table `table` draws for people
    /// (told whether to draw the wide one).
    pub fn print(
        &self,
        value: &impl Serialize,
        table: impl FnOnce(bool) -> String,
    ) -> anyhow::Result<()> {
        match self.format() {
            Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
            Format::Yaml => print!("{}", serde_yaml::to_string(value)?),
            Format::Table => print!("{}", table(false)),
            Format::Wide => print!("{}", table(true)),
        }
        Ok(())
    }
}
