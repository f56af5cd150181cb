# The boxwire sandbox image: a small Debian with the usual developer tools, a
# non-root user, tini as PID 1 (it reaps zombies), and the agent binary as the
# very last layer so that shipping an agent update rebuilds one small layer.
#
# Written for the classic builder. The agent is built on the host
# (CGO_ENABLED=0, see `make image`) because containers here cannot reach the
# Go module proxy. BASE defaults to the official image; `make image` passes a
# locally built one (image/base-image.sh) when no registry answers.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils ca-certificates git procps python3 ripgrep tini \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 1000 boxwire \
 && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash boxwire \
 && mkdir -p /workspace /run/boxwire /run/boxwire-agent \
 && chown boxwire:boxwire /workspace

ENV LANG=C.UTF-8 \
    BOXWIRE_WORKSPACE=/workspace
WORKDIR /workspace
USER boxwire
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/boxwire-agent"]

# The version labels (org.opencontainers.image.version, io.boxwire.agent.version)
# are added by `docker build --label` in the Makefile, so that a new version
# re-runs no step here but the final COPY.
LABEL org.opencontainers.image.title="boxwire sandbox" \
      org.opencontainers.image.description="boxwire agent in a Debian sandbox" \
      org.opencontainers.image.source="https://github.com/boxwire/boxwire" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY build/image/boxwire-agent /usr/local/bin/boxwire-agent
