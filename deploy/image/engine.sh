#!/usr/bin/env bash
# The project's own container engine: Debian's dockerd on a socket of its own
# under var/engine, never the machine's default one, with no bridge (the
# containers use the host's network) and its data, exec root and log beside
# it. `make image` and `make image-test` start it; `make engine-stop` stops it.
#   deploy/image/engine.sh start|stop|host
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
ENGINE="$ROOT/var/engine"
SOCKET="$ENGINE/docker.sock"
export DOCKER_HOST="unix://$SOCKET"

answers() { docker info >/dev/null 2>&1; }

case "${1:-}" in
  host) echo "$DOCKER_HOST" ;;
  start)
    answers && exit 0
    command -v dockerd >/dev/null || { echo "dockerd is missing: make image-tools (Debian's docker.io)" >&2; exit 1; }
    mkdir -p "$ENGINE"
    dockerd --host "$DOCKER_HOST" --data-root "$ENGINE/data" --exec-root "$ENGINE/exec" --pidfile "$ENGINE/dockerd.pid" \
      --bridge=none --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
      --storage-driver overlay2 >>"$ENGINE/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do answers && { echo "container engine on $DOCKER_HOST"; exit 0; }; sleep 0.5; done
    echo "dockerd did not answer within 30 s: see $ENGINE/dockerd.log" >&2; exit 1 ;;
  stop)
    pid="$(cat "$ENGINE/dockerd.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
      if ! answers && { [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; }; then
        # The host network's namespace stays mounted under the exec root: gone, the folder can be removed.
        umount "$ENGINE/exec/netns/default" 2>/dev/null || true
        exit 0
      fi
      sleep 0.5
    done
    echo "dockerd did not stop within 20 s" >&2; exit 1 ;;
  *) echo "usage: $0 start|stop|host" >&2; exit 2 ;;
esac
