//! The exporters: one file per format behind one trait (hyperfine's `src/export/` layout).

mod csv;
mod html;
mod html_assets;
mod html_charts;
mod html_curves;
mod html_disruption;
mod html_runs;
mod html_timelines;
mod json;
mod markdown;
mod markdown_timelines;

pub use csv::{CsvExporter, CSV_HEADER};
pub use html::HtmlExporter;
pub use html_timelines::METHOD as TIMELINES_METHOD;
pub use json::JsonExporter;
pub use markdown::MarkdownExporter;

use crate::{Report, ReportError};

/// Turns a report into the bytes of one file.
pub trait Exporter {
    /// The file this format is written to inside the output directory.
    fn file_name(&self) -> &'static str;
    fn render(&self, report: &Report) -> Result<Vec<u8>, ReportError>;
}

/// Every format, in the order `render_dir` writes them.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(HtmlExporter),
        Box::new(MarkdownExporter),
        Box::new(JsonExporter),
        Box::new(CsvExporter),
    ]
}

/// The exporter for a format name (`html`, `markdown`/`md`, `json`, `csv`).
pub fn exporter(name: &str) -> Result<Box<dyn Exporter>, ReportError> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "html" => Box::new(HtmlExporter),
        "markdown" | "md" => Box::new(MarkdownExporter),
        "json" => Box::new(JsonExporter),
        "csv" => Box::new(CsvExporter),
        _ => return Err(ReportError::UnknownFormat(name.to_string())),
    })
}
