# Multi-stage build: a static-ish release build (with jemalloc, the shipped allocator), then a distroless non-root
# runtime with both binaries.
# Build: docker build -t admitpilot/admitpilot:0.1.0 .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin admitpilot --package certs-gen --features admitpilot/jemalloc \
 && install -D target/release/admitpilot /out/admitpilot \
 && install -D target/release/certs-gen /out/certs-gen

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/admitpilot /usr/local/bin/admitpilot
COPY --from=build /out/certs-gen /usr/local/bin/certs-gen
USER 65532:65532
EXPOSE 15017 15010 15014
ENTRYPOINT ["/usr/local/bin/admitpilot"]
