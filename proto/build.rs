//! Generates the AdminService code from `nauthera/admin/v1/admin.proto` with a pure-Rust protobuf
//! compiler, so a build needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "nauthera/admin/v1/admin.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // These carry client secrets; `src/redact.rs` gives them a Debug that never prints one.
        .skip_debug([
            "nauthera.admin.v1.ClientSpec",
            "nauthera.admin.v1.ClientSpec.secret",
            "nauthera.admin.v1.ApplyClientResponse",
            "nauthera.admin.v1.IdentityProviderSpec",
        ])
        .compile_fds(descriptors)?;
    Ok(())
}
