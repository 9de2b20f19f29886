# Stand-in for redis:7 (Debian bookworm's Redis 7.0): like the official image, a bare `redis-server ...`
# command listens on every interface without protected mode, and writes its RDB/AOF files to /data (the
# working directory, where docker-compose.yml mounts its volume). Built by scripts/compose_check.sh.
FROM bgw-local/debian:bookworm
RUN mkdir -p /data
WORKDIR /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
