use super::Exporter;
use crate::{Report, ReportError};
pub struct HtmlExporter;
impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str { "report.html" }
    fn render(&self, _r: &Report) -> Result<Vec<u8>, ReportError> { Ok(Vec::new()) }
}
