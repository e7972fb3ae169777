# syntax=docker/dockerfile:1
# The netaware image: the `netaware` binary (`netaware collector`,
# `netaware scheduler`, `netaware agent`, the operator's commands), built
# without the lab and the demo, and `netaware-agent`, the agent alone,
# which the DaemonSet runs on every node; on distroless (no shell, no
# package manager), as uid 65532 by default.
# Build: docker build -t netaware:0.1.0 .

# Build with the toolchain the project is tested with.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The protos compile with protox (pure Rust): no protoc needed.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features --bin netaware --bin netaware-agent \
 && mkdir -p /out \
 && cp target/release/netaware target/release/netaware-agent /out/

# glibc and libgcc, nothing else.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
# The agent's DaemonSet runs as uid 0 with only CAP_NET_RAW (raw ICMP);
# everything else runs as this user.
EXPOSE 7470 7471 9470 9471 9472
ENTRYPOINT ["/usr/local/bin/netaware"]
