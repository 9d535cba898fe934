//! Where `diagnose -f` reads manifests from, as `kubectl apply -f` does: files, directories
//! (their `.yaml`, `.yml` and `.json` files in name order; with `-R` their subdirectories too)
//! and `-` for standard input.

use std::path::{Path, PathBuf};

use crate::error::CliError;

/// One file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// The extensions kubectl reads from a directory.
const MANIFEST_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Reads every file the paths name, in order.
pub fn read_sources(paths: &[PathBuf], recursive: bool) -> Result<Vec<Source>, CliError> {
    let mut files = Vec::new();
    for path in paths {
        if path == Path::new("-") {
            let text =
                std::io::read_to_string(std::io::stdin()).map_err(|source| CliError::ReadFile {
                    path: path.clone(),
                    source,
                })?;
            files.push(Source {
                path: path.clone(),
                text,
            });
            continue;
        }
        let metadata = std::fs::metadata(path).map_err(|source| CliError::ReadFile {
            path: path.clone(),
            source,
        })?;
        let found = if metadata.is_dir() {
            let mut found = Vec::new();
            manifest_files(path, recursive, &mut found)?;
            found
        } else {
            vec![path.clone()]
        };
        for file in found {
            let text = std::fs::read_to_string(&file).map_err(|source| CliError::ReadFile {
                path: file.clone(),
                source,
            })?;
            files.push(Source { path: file, text });
        }
    }
    Ok(files)
}

/// The manifest files of a directory, in name order; subdirectories only when `recursive`.
fn manifest_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let unreadable = |source| CliError::ReadFile {
        path: dir.to_owned(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<_, _>>()
        .map_err(unreadable)?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            if recursive {
                manifest_files(&entry, recursive, out)?;
            }
        } else if entry
            .extension()
            .and_then(|extension| extension.to_str())
            .is_some_and(|extension| MANIFEST_EXTENSIONS.contains(&extension))
        {
            out.push(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_read_like_kubectl_apply_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("# {name}\n")).unwrap();
        };
        for name in ["b.yaml", "a.yml", "c.json", "notes.txt", "nested/d.yaml"] {
            write(name);
        }
        let names = |recursive| {
            read_sources(&[dir.path().to_owned()], recursive)
                .unwrap()
                .into_iter()
                .map(|source| {
                    source
                        .path
                        .strip_prefix(dir.path())
                        .unwrap()
                        .display()
                        .to_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(false), ["a.yml", "b.yaml", "c.json"]);
        assert_eq!(names(true), ["a.yml", "b.yaml", "c.json", "nested/d.yaml"]);
        let missing = read_sources(&[dir.path().join("gone.yaml")], false).unwrap_err();
        assert!(missing.to_string().contains("gone.yaml"), "{missing}");
    }
}
