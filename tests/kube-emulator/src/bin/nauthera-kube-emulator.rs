//! Starts the Kubernetes API emulator, writes a kubeconfig for its superuser and prints one
//! JSON line saying where it listens; runs until interrupted.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use nauthera_kube_emulator::{Emulator, Options};

/// A Kubernetes API emulator on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Where to write a kubeconfig for the superuser.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The kubeconfig context's default namespace.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// The port to listen on (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 1)]
    bookmark_seconds: u64,
    /// Serve FILE as the log of pod NAMESPACE/POD (`kubectl logs`); repeatable. The file is read
    /// at each request, so it may still be written to.
    #[arg(long = "pod-log", value_name = "NAMESPACE/POD=FILE", value_parser = parse_pod_log)]
    pod_logs: Vec<((String, String), PathBuf)>,
}

fn parse_pod_log(text: &str) -> Result<((String, String), PathBuf), String> {
    let (pod, file) = text.split_once('=').ok_or("expected NAMESPACE/POD=FILE")?;
    let (namespace, name) = pod.split_once('/').ok_or("expected NAMESPACE/POD=FILE")?;
    if namespace.is_empty() || name.is_empty() || file.is_empty() {
        return Err("expected NAMESPACE/POD=FILE".into());
    }
    Ok(((namespace.into(), name.into()), PathBuf::from(file)))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nauthera-kube-emulator: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let options = Options {
        bookmark_interval: Duration::from_secs(args.bookmark_seconds.max(1)),
        port: args.port,
        pod_logs: args.pod_logs.into_iter().collect(),
        ..Options::default()
    };
    let emulator = Emulator::start_with(options).await?;
    emulator
        .write_kubeconfig(
            &args.kubeconfig,
            emulator.superuser_token(),
            &args.namespace,
        )
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write the kubeconfig {}: {e}",
                args.kubeconfig.display()
            )
        })?;
    let line = serde_json::json!({
        "listening": emulator.base_url(),
        "kubeconfig": args.kubeconfig.display().to_string(),
    });
    println!("{line}");
    wait_for_signal().await;
    emulator.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
