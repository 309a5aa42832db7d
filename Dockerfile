# openclaw-lossless sidecar. The image listens on 0.0.0.0 inside the container only because a container's
# loopback is unreachable from the host: publish it to the host's loopback only, e.g.
#   docker run -p 127.0.0.1:8377:8377 -v lossless:/data openclaw-lossless
# BASE is any Debian 12 image (Python 3.11 from Debian); docs/operations.md says how to build it offline.
ARG BASE=debian:bookworm-slim

# -- build: the virtual environment and the local model, with whatever installing them needs -------------------
FROM ${BASE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 \
    LOSSLESS_MODEL_DIR=/opt/openclaw-lossless/models
WORKDIR /src
COPY pyproject.toml README.md plugin-manifest.json ./
COPY openclaw_lossless ./openclaw_lossless
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install . \
    && /opt/venv/bin/openclaw-lossless model fetch \
    && /opt/venv/bin/pip uninstall --yes pip setuptools

# -- run: Python, the venv and the model; no compiler, no pip, no sources ---------------------------------------
FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /data lossless \
    && mkdir -m 0700 /data \
    && chown 10001:10001 /data
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=10001:10001 /opt/openclaw-lossless/models /opt/openclaw-lossless/models
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 \
    LOSSLESS_STATE_DIR=/data LOSSLESS_MODEL_DIR=/opt/openclaw-lossless/models

# The volume is created from /data as the image has it: owned by the user that runs the server.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8377
HEALTHCHECK --interval=30s --timeout=5s CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8377/healthz', timeout=4)"]
CMD ["openclaw-lossless", "serve", "--host", "0.0.0.0", "--allow-remote"]
