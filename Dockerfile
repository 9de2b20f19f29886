# The gateway's image (web, worker, migrate). PYTHON_IMAGE lets scripts/compose_check.sh build it on a
# local stand-in built from Debian packages; production uses the official image.
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . .
RUN pip install --no-cache-dir -e . && python manage.py collectstatic --noinput --settings=gateway_site.settings.local
EXPOSE 8000
CMD ["gunicorn", "gateway_site.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
