//! A TCP proxy on loopback that a test can cut, as a network partition would: while cut, bytes
//! stop flowing both ways on every connection, new connections are accepted and then ignored,
//! and nothing is refused (so a client waits for its own timeouts, as it would without a route).
//! Healing drops what was held and forwards new connections again.

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running proxy; stops with its handle.
pub struct CuttableProxy {
    address: SocketAddr,
    cut: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl CuttableProxy {
    /// Listens on a loopback port and forwards every connection to `target`.
    pub async fn start(target: SocketAddr) -> anyhow::Result<CuttableProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("the proxy cannot listen on loopback")?;
        let address = listener.local_addr()?;
        let (cut, cut_receiver) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(forward(inbound, target, cut_receiver.clone()));
            }
        });
        Ok(CuttableProxy { address, cut, task })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops every byte, on open connections and new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Whether it is cut now.
    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }

    /// Forwards again; connections held while cut are closed.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(mut inbound: TcpStream, target: SocketAddr, mut cut: watch::Receiver<bool>) {
    if *cut.borrow_and_update() {
        // Accepted while cut: held without a byte until healed, then closed.
        let _ = cut.wait_for(|cut| !*cut).await;
        return;
    }
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        return;
    };
    let was_cut = tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
        _ = cut.wait_for(|cut| *cut) => true,
    };
    if was_cut {
        // Both ends stay open and silent until healed.
        let _ = cut.wait_for(|cut| !*cut).await;
    }
    let _ = inbound.shutdown().await;
    let _ = outbound.shutdown().await;
}
