# gpu-claims: a static binary on distroless, non-root.
#   docker build -t ghcr.io/cozystack/gpu-claims:0.1.0 .
# The same binary is the kubectl plugin when named kubectl-gpu_claims
# (`kubectl gpu-claims status`); to take it out of the image:
#   docker create --name gc ghcr.io/cozystack/gpu-claims:0.1.0
#   docker cp -L gc:/kubectl-gpu_claims ~/.local/bin/ && docker rm gc
# Build stage: musl for a static binary (ring builds with musl-gcc).
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
# Dependencies first, so that a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
# Every workspace member's manifest, or cargo cannot read the workspace.
COPY actors/Cargo.toml actors/Cargo.toml
COPY apiserver/Cargo.toml apiserver/Cargo.toml
COPY dra-cel-cost/Cargo.toml dra-cel-cost/Cargo.toml
COPY serve/Cargo.toml serve/Cargo.toml
COPY testbed/Cargo.toml testbed/Cargo.toml
RUN mkdir -p src actors/src actors/benches apiserver/src dra-cel-cost/src serve/src testbed/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs actors/src/lib.rs apiserver/src/lib.rs dra-cel-cost/src/lib.rs serve/src/lib.rs testbed/src/lib.rs \
 && cargo build --release --locked --no-default-features --target x86_64-unknown-linux-musl --bin gpu-claims || true
COPY . .
# The operator alone: without the default `dev` feature the binary links
# neither the test world (gpu-claims-testbed) nor the embedded API server.
RUN touch src/main.rs src/lib.rs actors/src/lib.rs dra-cel-cost/src/lib.rs serve/src/lib.rs \
 && cargo build --release --locked --no-default-features --target x86_64-unknown-linux-musl --bin gpu-claims \
 && mkdir /out \
 && cp target/x86_64-unknown-linux-musl/release/gpu-claims /out/gpu-claims \
 && ln -s gpu-claims /out/kubectl-gpu_claims

# Run stage: no shell, no package manager, uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
# The binary, and the kubectl plugin's name for it (a symlink).
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["/gpu-claims"]
CMD ["run"]
