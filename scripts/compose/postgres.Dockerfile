# Stand-in for postgres:16 (Debian bookworm's PostgreSQL 15): POSTGRES_PASSWORD / POSTGRES_DB honoured on
# first start, data in /var/lib/postgresql/data, pg_isready on PATH. Built by scripts/compose_check.sh.
FROM bgw-local/debian:bookworm
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
