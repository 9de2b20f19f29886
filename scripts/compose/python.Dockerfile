# Stand-in for python:3.11-slim: Debian bookworm's Python 3.11 in a venv on PATH (python, pip), with pip
# reading only the wheelhouse copied in (no index). Built by scripts/compose_check.sh.
FROM bgw-local/debian:bookworm
COPY wheels /wheels
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-index --find-links /wheels --quiet pip setuptools wheel
ENV PATH=/opt/venv/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels LANG=C.UTF-8
CMD ["python3"]
