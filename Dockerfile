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

# python3-pip and python3-venv make it a workbench (about 17 MB): the sandbox
# user installs packages into HOME, which lives on the workspace volume, so
# they persist with it. Debian's EXTERNALLY-MANAGED marker goes: the root
# filesystem is read-only at run time, so pip can only install for the user
# (~/.local, "Defaulting to user installation") or into a venv. Node and npm
# are not here (about 290 MB more); README "Deriving an image" adds them.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils ca-certificates git procps python3 python3-pip python3-venv ripgrep tini \
 && rm -rf /var/lib/apt/lists/* /usr/lib/python3*/EXTERNALLY-MANAGED

# `python` as well as `python3` (what Debian's python-is-python3 does): tools
# and test suites (langchain-tests' sandbox suite) call it by that name.
#
# HOME is /workspace/.home, on the workspace volume: writable although the
# root filesystem is not, and kept with the workspace across sandbox
# replacements. The agent creates it when a workspace lacks it.
RUN groupadd --gid 1000 boxwire \
 && useradd --uid 1000 --gid 1000 --home-dir /workspace/.home --no-create-home --shell /bin/bash boxwire \
 && mkdir -p /workspace/.home /run/boxwire /run/boxwire-agent \
 && chown -R boxwire:boxwire /workspace \
 && ln -s /usr/bin/python3 /usr/local/bin/python
COPY image/profile.sh /etc/profile.d/boxwire.sh

# PATH leads with ~/.local/bin (pip's scripts; npm's with the prefix), for
# processes that read no login profile; login shells get it from
# /etc/profile.d/boxwire.sh. Commands inherit HOME, PATH and
# NPM_CONFIG_PREFIX from the agent (agent/tools/env.go).
ENV LANG=C.UTF-8 \
    BOXWIRE_WORKSPACE=/workspace \
    HOME=/workspace/.home \
    PATH=/workspace/.home/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NPM_CONFIG_PREFIX=/workspace/.home/.local
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

# The agent and, when make agent wrote it, its hash beside it (image/agent-hash.sh),
# in one layer.
COPY build/image/boxwire-agent* /usr/local/bin/
