//! Smoke test: the quick mode runs to completion and produces a measured row for
//! every benchmark B1..B8 (the numbers themselves are not asserted).

use std::process::Command;

#[test]
fn quick_mode_produces_every_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("quick")
        .output()
        .expect("running bench quick");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench quick failed: {}\n{stderr}",
        out.status
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| B")).collect();
    for id in ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8"] {
        let mine: Vec<&&str> = rows
            .iter()
            .filter(|l| l.starts_with(&format!("| {id} |")))
            .collect();
        assert!(!mine.is_empty(), "no row for {id}:\n{stdout}");
        for row in mine {
            assert!(
                !row.contains("**failed**"),
                "{id} was not measured: {row}\nnotes:\n{}",
                stdout
                    .lines()
                    .filter(|l| l.starts_with(&format!("- **{id} ")))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    assert!(stdout.contains("- machine: "), "header missing:\n{stdout}");
    assert!(stdout.contains("- command: "), "header missing:\n{stdout}");
}
