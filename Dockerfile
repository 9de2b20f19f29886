FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml ./
COPY . .
RUN pip install --no-cache-dir -e . && python manage.py collectstatic --noinput --settings=gateway_site.settings.local
EXPOSE 8000
CMD ["gunicorn", "gateway_site.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
