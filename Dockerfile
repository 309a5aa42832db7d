# openclaw-lossless sidecar. The image listens on 0.0.0.0 inside the container only because a container's
# loopback is unreachable from the host: publish it to the host's loopback only, e.g.
#   docker run -p 127.0.0.1:8377:8377 -v lossless:/data openclaw-lossless
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LOSSLESS_STATE_DIR=/data \
    LOSSLESS_MODEL_DIR=/opt/openclaw-lossless/models

RUN useradd --create-home --uid 10001 lossless
WORKDIR /app
COPY pyproject.toml README.md plugin-manifest.json ./
COPY openclaw_lossless ./openclaw_lossless
RUN pip install . && openclaw-lossless model fetch && chown -R lossless /opt/openclaw-lossless

USER lossless
VOLUME ["/data"]
EXPOSE 8377
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8377/healthz', timeout=4)"
CMD ["openclaw-lossless", "serve", "--host", "0.0.0.0", "--allow-remote"]
