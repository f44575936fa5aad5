//! Renders the fixture comparison into a directory (default `target/fixture-report`), to look at
//! the report without hardware: `cargo run -p sanbench-report --example fixture_report [DIR]`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/fixture-report".into());
    let cmp = sanbench_store::fixture::sample_comparison();
    for f in sanbench_report::render_dir(
        &cmp,
        std::path::Path::new(&dir),
        &sanbench_report::Options::default(),
    )? {
        println!("{}", f.display());
    }
    Ok(())
}
