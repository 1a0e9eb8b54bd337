//! Compiles the vendored Kubernetes protobuf descriptions (proto/, written
//! by proto/vendor.py) into one descriptor set, which the server decodes
//! request bodies and encodes answers with (src/protobuf). Only with the
//! `conformance` feature: without it there is no protobuf to speak.

#[cfg(not(feature = "conformance"))]
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}

#[cfg(feature = "conformance")]
fn main() {
    use prost::Message;
    let root = std::path::Path::new("proto");
    let files: Vec<String> = walk(root)
        .into_iter()
        .map(|p| {
            p.strip_prefix(root)
                .expect("under proto/")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let set = protox::compile(&files, [root]).expect("the vendored protos compile");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("kubernetes.fds"), set.encode_to_vec()).expect("OUT_DIR is writable");
    println!("cargo:rerun-if-changed=proto");
}

/// Every `.proto` under `dir`, in a stable order.
#[cfg(feature = "conformance")]
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("proto/ is readable")
        .map(|e| e.expect("proto/ is readable").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            found.extend(walk(&p));
        } else if p.extension().is_some_and(|e| e == "proto") {
            found.push(p);
        }
    }
    found
}
