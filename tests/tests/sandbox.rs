//! The README's first command: the sandbox starts everything, applies the examples, prints how to
//! use it, and leaves nothing listening when it stops.

use std::process::Command;

#[test]
fn sandbox_starts_everything_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_nauthera-sandbox"))
        .arg("--once")
        .arg("--dir")
        .arg(dir.path().join("sandbox"))
        .output()
        .expect("the sandbox runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the sandbox failed:\n{stdout}\n{stderr}"
    );
    for expected in [
        "kubectl get oidcclients -A",
        "kubectl nauthera status -A",
        "export KUBECONFIG=",
    ] {
        assert!(
            stdout.contains(expected),
            "the summary lacks {expected:?}:\n{stdout}"
        );
    }
    assert!(dir.path().join("sandbox/kubeconfig").exists());
    // Every example of every kind registers: what depends on the Organization and the Branding
    // waited for them instead of being refused.
    for (kind, name) in [
        ("Organization", "acme"),
        ("Branding", "acme-sign-in"),
        ("IdentityProvider", "github"),
        ("OIDCClient", "billing-web"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(kind) && l.contains(name) && l.ends_with("Registered")),
            "{kind} {name} is not shown Registered:\n{stdout}"
        );
    }

    // Every address the summary announced is closed again: no process was left behind.
    let addresses: Vec<&str> = stdout
        .split_whitespace()
        .filter_map(|word| {
            let word = word
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            let address = word.split('/').next()?;
            address.starts_with("127.0.0.1:").then_some(address)
        })
        .collect();
    assert!(
        addresses.len() >= 4,
        "the summary names every listener: {stdout}"
    );
    for address in addresses {
        assert!(
            std::net::TcpStream::connect(address).is_err(),
            "{address} still accepts connections after the sandbox stopped"
        );
    }
}
