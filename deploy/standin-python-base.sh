#!/bin/sh
# A stand-in for the public python:3.11-slim base image, built from Debian packages, for machines
# that cannot pull from Docker Hub (the real-engine compose test uses it there). It is not used when
# the real image can be pulled, and the Dockerfile stays the one users build.
#
#   deploy/standin-python-base.sh [TAG]        (default TAG: python:3.11-slim; needs root, mmdebstrap, docker)
#
# What makes it behave like the real image for our Dockerfile:
#   * Debian bookworm's python3 (3.11) with pip and venv; `python` and `pip` on PATH (/usr/local/bin);
#   * pip may install into the system interpreter, as in the real image: Debian marks its python
#     "externally managed" (PEP 668), so that marker file is removed;
#   * useradd (passwd) as in the real image; CMD python3.
# It also trusts the build host's extra certificate authorities (/usr/local/share/ca-certificates),
# so that pip reaches the package index from behind a TLS-intercepting proxy, as on our CI machines.
# The mirror can be changed with DEBIAN_MIRROR.
set -eu
tag=${1:-python:3.11-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d "${TMPDIR:-/tmp}/standin-base.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='ln -sf /usr/bin/python3 "$1/usr/local/bin/python"; ln -sf /usr/bin/pip3 "$1/usr/local/bin/pip"' \
    --customize-hook='for c in /usr/local/share/ca-certificates/*.crt; do [ -f "$c" ] && cp "$c" "$1/usr/local/share/ca-certificates/"; done; chroot "$1" update-ca-certificates >/dev/null' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$work/rootfs.tar" "$mirror"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --message "stand-in for python:3.11-slim, built from Debian bookworm packages" \
    "$work/rootfs.tar" "$tag" >/dev/null
echo "built $tag from Debian packages (stand-in)"
