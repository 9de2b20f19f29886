#!/usr/bin/env bash
# The Prometheus scrape test needs Debian's prometheus binary (not its service: the test runs the
# binary itself on a free port in a temp dir). Install it where apt is available and we are root;
# otherwise that test skips with a clear reason. Never starts the system service.
set -u
command -v prometheus >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing prometheus for the scrape test (apt-get)"
  # policy-rc.d 101: the package must not start its service here
  policy=/usr/sbin/policy-rc.d
  created=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && created=1; fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
    || echo "could not install prometheus; the Prometheus scrape test will be skipped"
  [ "$created" = 1 ] && rm -f "$policy"
fi
exit 0
