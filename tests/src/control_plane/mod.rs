//! Which Kubernetes control plane a test runs on: the emulator (fast, nothing to build) or a real
//! kube-apiserver, etcd and kube-controller-manager built from source ([`real`]), or instead of
//! the built one an existing cluster named by [`KUBECONFIG_ENV`].
//!
//! End-to-end tests are written once and declared with [`crate::e2e_test`]; each then runs as two
//! tests, `NAME::emulator` and `NAME::real`, and [`Plane::current`] tells the harness which one it
//! is serving. Code outside a test (the sandbox, the benchmark, the chaos program) chooses with
//! [`Plane::run`] too and defaults to the emulator.

pub mod real;
pub mod third_party;

use std::future::Future;

/// Names the kubeconfig of an existing cluster that the `real` variants run on instead of the
/// control plane built from source.
pub const KUBECONFIG_ENV: &str = "NAUTHERA_TEST_KUBECONFIG";

/// A control plane the harness can run a test on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plane {
    /// The Kubernetes API emulator in this process, one per test.
    Emulator,
    /// A real control plane: built from source, one per test binary (or the cluster
    /// [`KUBECONFIG_ENV`] names), with a namespace per test.
    Real,
}

tokio::task_local! {
    static PLANE: Plane;
}

impl Plane {
    /// The plane of the test (or program) running now; the emulator outside [`Plane::run`].
    pub fn current() -> Plane {
        PLANE.try_with(|plane| *plane).unwrap_or(Plane::Emulator)
    }

    /// Runs `work` with this plane as [`Plane::current`].
    pub async fn run<F: Future>(self, work: F) -> F::Output {
        PLANE.scope(self, work).await
    }

    /// The name used on the command line and in test names.
    pub fn name(self) -> &'static str {
        match self {
            Plane::Emulator => "emulator",
            Plane::Real => "real",
        }
    }

    /// Parses [`Plane::name`].
    pub fn parse(text: &str) -> Option<Plane> {
        [Plane::Emulator, Plane::Real]
            .into_iter()
            .find(|plane| plane.name() == text)
    }
}

/// Declares an end-to-end test that runs on both control planes: `NAME::emulator` and
/// `NAME::real` (`cargo test -- ::real` runs the real ones alone). The test is an `async fn` with
/// no arguments; the harness reads the plane from [`Plane::current`].
///
/// ```ignore
/// async fn registers_a_client() { let stack = Stack::start().await; /* ... */ }
/// nauthera_tests::e2e_test!(registers_a_client);
/// ```
///
/// `e2e_test!(real_only: NAME)` declares a test that only a real control plane can run (garbage
/// collection by the real controller, etcd compaction).
#[macro_export]
macro_rules! e2e_test {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn emulator() {
                    $crate::control_plane::Plane::Emulator.run(super::$name()).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn real() {
                    $crate::control_plane::Plane::Real.run(super::$name()).await
                }
            }
        )+
    };
    (real_only: $($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn real() {
                    $crate::control_plane::Plane::Real.run(super::$name()).await
                }
            }
        )+
    };
}
