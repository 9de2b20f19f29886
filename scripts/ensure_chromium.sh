#!/usr/bin/env bash
# The browser tests need Debian's chromium. Install it where apt is available and we are root;
# otherwise those tests skip with a clear reason (and fail when CI is set: CI must have the browser).
set -u
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium for the browser tests (apt-get)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "could not install chromium; browser tests will be skipped (they fail when CI is set)"
fi
