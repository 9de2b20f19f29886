# The gateway's image (web, worker, migrate). PYTHON_IMAGE lets scripts/compose_check.sh build it on a
# local stand-in built from Debian packages; production uses the official image.
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . .
# Code and dependencies belong to root (read-only for the app); the app's user owns only what it writes:
# /app/var/files (/v1/files blobs when GATEWAY_FILES_STORAGE is the local disk; by default they are in the
# database) and /var/run/gateway-metrics (Prometheus multiprocess files). A named volume mounted there
# starts with this ownership.
RUN pip install --no-cache-dir -e . \
    && python manage.py collectstatic --noinput --settings=gateway_site.settings.local \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home --shell /usr/sbin/nologin gateway \
    && mkdir -p /app/var/files /var/run/gateway-metrics \
    && chown gateway:gateway /app/var /app/var/files /var/run/gateway-metrics
USER gateway
EXPOSE 8000
# the same web server as `make up` and docker-compose.yml: gunicorn with the gateway's uvicorn worker
# (gunicorn.conf.py: 35 s graceful stop, no X-Forwarded-For rewriting by the server), 2 processes
CMD ["gunicorn", "gateway_site.asgi:application", "--bind", "0.0.0.0:8000", "--workers", "2", "--access-logfile", "-"]
