//! Kubeconfig files pointing at the emulator.

use std::io::Write;
use std::path::Path;

/// A kubeconfig with one cluster, one user (a bearer token) and one context.
pub fn render(server: &str, ca_pem: &str, token: &str, namespace: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: nauthera-emulator
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: nauthera-emulator-user
  user:
    token: {token}
contexts:
- name: nauthera-emulator
  context:
    cluster: nauthera-emulator
    user: nauthera-emulator-user
    namespace: {namespace}
current-context: nauthera-emulator
preferences: {{}}
"
    )
}

/// Writes a kubeconfig readable only by its owner (it holds a token).
pub fn write(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
    namespace: &str,
) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(render(server, ca_pem, token, namespace).as_bytes())
}
