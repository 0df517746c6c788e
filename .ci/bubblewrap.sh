#!/usr/bin/env bash
# Install bubblewrap (Debian's package) so that the sandbox tests exercise both launchers: the
# kit's own (user namespaces) and bwrap, which is what distributions that restrict user
# namespaces (Ubuntu 23.10+) let through. Run as root.
set -euo pipefail
if ! command -v bwrap >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends bubblewrap
fi
bwrap --version
