//! The plugin's errors. Each names what failed and what to do; none carries a backtrace or a
//! secret.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(
        "cannot read the kubeconfig ({where_}): {source}; check --kubeconfig, $KUBECONFIG and --context (kubectl config get-contexts)"
    )]
    Kubeconfig {
        where_: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot build a Kubernetes client: {0}; check the kubeconfig's cluster and user")]
    Client(#[source] kube::Error),
    #[error("{what} failed: {detail}; {hint}")]
    Kube {
        what: String,
        detail: String,
        hint: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
    #[error("cannot encode the report as {format}: {detail}")]
    Encode {
        format: &'static str,
        detail: String,
    },
    #[error("{0}")]
    NotConfirmed(String),
    /// The cluster refused what was asked, in a sentence that says why and what to do.
    #[error("{0}")]
    Refused(String),
}

impl CliError {
    /// The reader went away (`| head`): not an error for a command-line tool.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Output(error) if error.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// A Kubernetes API call that failed, with a hint picked by what failed.
    pub fn kube(what: impl Into<String>, error: &kube::Error) -> Self {
        let (detail, hint) = describe_kube_error(error);
        CliError::Kube {
            what: what.into(),
            detail,
            hint,
        }
    }
}

/// The error's own words and what to do about it.
pub fn describe_kube_error(error: &kube::Error) -> (String, String) {
    match error {
        kube::Error::Api(status) => {
            let hint = match status.code {
                401 => "check the credentials of the kubeconfig's user (an expired token?)",
                403 => "ask a cluster administrator for the RBAC permission named above",
                404 => {
                    "check the name and namespace; if the kind itself is unknown, install the \
                     CRDs (kubectl apply -k deploy/crds)"
                }
                409 => "someone else changed the object at the same time; run the command again",
                _ => "see the message above",
            };
            (
                format!("{} ({})", status.message, status.code),
                hint.to_owned(),
            )
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => (
            error.to_string(),
            "check that the cluster in the kubeconfig is reachable from here".to_owned(),
        ),
        other => (
            other.to_string(),
            "check the kubeconfig and the cluster".to_owned(),
        ),
    }
}

/// The HTTP status of an API error, if it is one.
pub fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_pipe_is_a_clean_exit() {
        let closed = CliError::Output(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(closed.is_broken_pipe());
        let full = CliError::Output(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!full.is_broken_pipe());
        assert!(!CliError::Usage("x".into()).is_broken_pipe());
    }
}
