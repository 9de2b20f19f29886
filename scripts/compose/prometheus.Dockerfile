# Stand-in for prom/prometheus (Debian bookworm's Prometheus 2.42): `prometheus` and /bin/sh on PATH, the
# config at /etc/prometheus/prometheus.yml, data in /prometheus owned by nobody, run as nobody — what
# docker-compose.yml's prometheus service relies on. Built by scripts/compose_check.sh.
FROM bgw-local/debian:bookworm
RUN mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
