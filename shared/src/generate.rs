//! The files generated from this crate: the CRDs under `deploy/crds/` (from the resource types),
//! the same CRD files under the Helm chart's `charts/nauthera-reconciler/crds/`, and the runbook
//! pages under `docs/runbooks/` (from the reason catalog).
//!
//! `cargo run -p nauthera-tests --bin nauthera-generate` writes them (with the GitOps files the
//! tests crate generates); a test fails when the
//! committed files differ from what the code generates. Everything in the three folders is
//! generated: a file there that the code does not generate is reported as extra, and removed by
//! [`write_all`].

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::catalog::{self, Facts, GENERATE_COMMAND, Reason};

/// The command that regenerates every file here.
pub const COMMAND: &str = GENERATE_COMMAND;

/// The folder of the generated CRDs, relative to the repository root.
pub const CRD_DIR: &str = "deploy/crds";

/// The Helm chart's CRDs, relative to the repository root: the files of [`CRD_DIR`] byte for
/// byte, without the kustomization (Helm installs every file of a chart's `crds/` as it is).
pub const CHART_CRD_DIR: &str = "charts/nauthera-reconciler/crds";

/// The folders whose every file is generated, relative to the repository root.
pub const GENERATED_DIRS: [&str; 3] = [CRD_DIR, CHART_CRD_DIR, catalog::RUNBOOK_DIR];

/// One generated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative to the repository root, `/`-separated.
    pub path: PathBuf,
    pub contents: String,
}

/// How a file in the repository differs from what the code generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Staleness {
    /// Generated, but absent from the repository.
    Missing,
    /// Present, with other contents.
    Differs,
    /// Present in a generated folder, but not generated.
    Extra,
}

impl Staleness {
    pub const fn as_str(self) -> &'static str {
        match self {
            Staleness::Missing => "missing",
            Staleness::Differs => "differs",
            Staleness::Extra => "not generated",
        }
    }
}

/// A file of the repository that is not what the code generates.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StaleFile {
    /// Relative to the repository root.
    pub path: PathBuf,
    pub staleness: Staleness,
}

impl fmt::Display for StaleFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.staleness.as_str())
    }
}

/// Why generating, checking or writing failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("could not encode the CustomResourceDefinition `{name}` as YAML: {source}")]
    Yaml {
        name: String,
        #[source]
        source: serde_saphyr::SerializeError,
    },
    #[error("could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not remove {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Every generated file: the CRDs and their kustomization, the chart's copies of the CRDs, the
/// runbook pages and their index.
pub fn generated_files() -> Result<Vec<GeneratedFile>, GenerateError> {
    let mut files = crd_files(&crate::resources::crds())?;
    let chart = chart_crd_files(&files);
    files.extend(chart);
    files.extend(runbook_files());
    Ok(files)
}

/// The chart's CRD files: each CRD file of `crd_files` under [`CHART_CRD_DIR`], unchanged.
pub fn chart_crd_files(crd_files: &[GeneratedFile]) -> Vec<GeneratedFile> {
    crd_files
        .iter()
        .filter(|file| file.path.starts_with(CRD_DIR))
        .filter(|file| !file.path.ends_with("kustomization.yaml"))
        .filter_map(|file| {
            Some(GeneratedFile {
                path: Path::new(CHART_CRD_DIR).join(file.path.file_name()?),
                contents: file.contents.clone(),
            })
        })
        .collect()
}

/// The CRD files for a set of CRDs: one `<plural>.<group>.yaml` each, and a
/// `kustomization.yaml` listing them in the given order.
pub fn crd_files(crds: &[CustomResourceDefinition]) -> Result<Vec<GeneratedFile>, GenerateError> {
    let mut files = Vec::with_capacity(crds.len() + 1);
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
        let yaml = serde_saphyr::to_string(crd).map_err(|source| GenerateError::Yaml {
            name: name.clone(),
            source,
        })?;
        let file_name = format!("{name}.yaml");
        files.push(GeneratedFile {
            path: Path::new(CRD_DIR).join(&file_name),
            contents: format!(
                "{}{}",
                yaml_header("the Rust types in shared/src/resources"),
                yaml.trim_start_matches("---\n")
            ),
        });
        names.push(file_name);
    }
    let resources = if names.is_empty() {
        String::from("resources: []\n")
    } else {
        names
            .iter()
            .fold(String::from("resources:\n"), |list, name| {
                list + "  - " + name + "\n"
            })
    };
    files.push(GeneratedFile {
        path: Path::new(CRD_DIR).join("kustomization.yaml"),
        contents: format!(
            "{}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{resources}",
            yaml_header("the Rust types in shared/src/resources")
        ),
    });
    Ok(files)
}

/// The runbook pages, one `<Reason>.md` per reason, and the index `README.md`. The pages fill
/// in the reconciler's namespace and ServiceAccount of the standard install.
pub fn runbook_files() -> Vec<GeneratedFile> {
    let facts = Facts::install_defaults();
    let mut files: Vec<GeneratedFile> = Reason::ALL
        .into_iter()
        .map(|reason| GeneratedFile {
            path: PathBuf::from(catalog::runbook_path(reason)),
            contents: catalog::runbook_page(reason.entry(), &facts),
        })
        .collect();
    files.extend(catalog::ALERTS.iter().map(|alert| GeneratedFile {
        path: PathBuf::from(alert.path()),
        contents: catalog::alert_runbook_page(alert, &facts),
    }));
    files.push(GeneratedFile {
        path: Path::new(catalog::RUNBOOK_DIR).join("README.md"),
        contents: catalog::runbook_index(),
    });
    files
}

/// The files under `root` that are missing, differ from the generated ones, or sit in a
/// generated folder without being generated; sorted by path.
pub fn stale_files(root: &Path) -> Result<Vec<StaleFile>, GenerateError> {
    stale_against(root, &generated_files()?)
}

/// Writes every missing or differing file under `root` and removes the extra ones. Returns what
/// it changed.
pub fn write_all(root: &Path) -> Result<Vec<StaleFile>, GenerateError> {
    let files = generated_files()?;
    let stale = stale_against(root, &files)?;
    for file in files
        .iter()
        .filter(|file| stale.iter().any(|s| s.path == file.path))
    {
        let path = root.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|source| GenerateError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        fs::write(&path, &file.contents).map_err(|source| GenerateError::Write {
            path: path.clone(),
            source,
        })?;
    }
    for extra in stale.iter().filter(|s| s.staleness == Staleness::Extra) {
        let path = root.join(&extra.path);
        fs::remove_file(&path).map_err(|source| GenerateError::Remove { path, source })?;
    }
    Ok(stale)
}

fn stale_against(root: &Path, files: &[GeneratedFile]) -> Result<Vec<StaleFile>, GenerateError> {
    let mut stale = Vec::new();
    for file in files {
        let path = root.join(&file.path);
        let staleness = match fs::read(&path) {
            Ok(bytes) if bytes == file.contents.as_bytes() => continue,
            Ok(_) => Staleness::Differs,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Staleness::Missing,
            Err(source) => return Err(GenerateError::Read { path, source }),
        };
        stale.push(StaleFile {
            path: file.path.clone(),
            staleness,
        });
    }
    for dir in GENERATED_DIRS {
        for path in files_under(root, Path::new(dir))? {
            if !files.iter().any(|file| file.path == path) {
                stale.push(StaleFile {
                    path,
                    staleness: Staleness::Extra,
                });
            }
        }
    }
    stale.sort();
    Ok(stale)
}

/// Every file below `root/dir`, as paths relative to `root`; none when `dir` does not exist.
fn files_under(root: &Path, dir: &Path) -> Result<Vec<PathBuf>, GenerateError> {
    let entries = match fs::read_dir(root.join(dir)) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(GenerateError::Read {
                path: root.join(dir),
                source,
            });
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| GenerateError::Read {
            path: root.join(dir),
            source,
        })?;
        let relative = dir.join(entry.file_name());
        let file_type = entry.file_type().map_err(|source| GenerateError::Read {
            path: entry.path(),
            source,
        })?;
        if file_type.is_dir() {
            found.extend(files_under(root, &relative)?);
        } else {
            found.push(relative);
        }
    }
    Ok(found)
}

fn yaml_header(source: &str) -> String {
    format!(
        "# Generated from {source} by `{COMMAND}`.\n# Do not edit: change the code and run the command again.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_crd_set_still_has_a_valid_kustomization() {
        let files = crd_files(&[]).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, Path::new("deploy/crds/kustomization.yaml"));
        assert!(
            files[0]
                .contents
                .ends_with("kind: Kustomization\nresources: []\n")
        );
    }

    #[test]
    fn the_chart_holds_every_crd_file_unchanged_and_no_kustomization() {
        let files = generated_files().unwrap();
        let deploy: Vec<&GeneratedFile> = files
            .iter()
            .filter(|f| f.path.starts_with(CRD_DIR) && !f.path.ends_with("kustomization.yaml"))
            .collect();
        let chart: Vec<&GeneratedFile> = files
            .iter()
            .filter(|f| f.path.starts_with(CHART_CRD_DIR))
            .collect();
        assert!(!chart.is_empty());
        assert_eq!(deploy.len(), chart.len());
        for (deploy, chart) in deploy.iter().zip(&chart) {
            assert_eq!(deploy.path.file_name(), chart.path.file_name());
            assert_eq!(deploy.contents, chart.contents, "{}", chart.path.display());
        }
    }

    #[test]
    fn every_reason_has_a_page_and_the_index_is_generated() {
        let files = runbook_files();
        for reason in Reason::ALL {
            let path = PathBuf::from(format!("docs/runbooks/{reason}.md"));
            assert!(files.iter().any(|f| f.path == path), "{reason}");
        }
        assert!(
            files
                .iter()
                .any(|f| f.path == Path::new("docs/runbooks/README.md"))
        );
    }

    #[test]
    fn writing_into_an_empty_tree_then_checking_finds_nothing_stale() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("docs/runbooks")).unwrap();
        std::fs::write(root.path().join("docs/runbooks/Old.md"), "gone\n").unwrap();
        let changed = write_all(root.path()).unwrap();
        assert!(changed.contains(&StaleFile {
            path: PathBuf::from("docs/runbooks/Old.md"),
            staleness: Staleness::Extra
        }));
        assert!(!root.path().join("docs/runbooks/Old.md").exists());
        assert!(changed.iter().any(|f| f.staleness == Staleness::Missing));
        assert_eq!(stale_files(root.path()).unwrap(), Vec::new());
    }
}
