//! Output snapshots for the unit tests: `cli/snapshots/<name>`, rewritten when
//! `UPDATE_SNAPSHOTS=1` is set, else compared.

use std::path::PathBuf;

pub fn assert_snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no snapshot {}; run with UPDATE_SNAPSHOTS=1 and review it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "output differs from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
