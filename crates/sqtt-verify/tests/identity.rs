//! A code object verified against itself is clean, for every object of the corpus.
mod common;

#[test]
fn every_corpus_object_verifies_against_itself() {
    let files = common::corpus_files();
    assert!(
        files.len() >= 80,
        "expected the full corpus, found {} objects",
        files.len()
    );
    let mut failures = Vec::new();
    let mut instructions = 0usize;
    for p in &files {
        let bytes = std::fs::read(p).expect("read");
        match sqtt_verify::verify(&bytes, &bytes) {
            Ok(r) => {
                instructions += r
                    .functions
                    .iter()
                    .map(|f| f.original_instructions)
                    .sum::<usize>();
                assert!(
                    !r.functions.is_empty(),
                    "{}: no functions found",
                    p.display()
                );
                assert_eq!(r.inserted_instructions(), 0, "{}", p.display());
                if !r.is_clean() {
                    failures.push(format!(
                        "{}: {}",
                        p.display(),
                        r.findings
                            .iter()
                            .take(5)
                            .map(|f| f.to_string())
                            .collect::<Vec<_>>()
                            .join("\n  ")
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: error {e}", p.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} objects fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    assert!(
        instructions > 10_000,
        "only {instructions} instructions aligned"
    );
}
