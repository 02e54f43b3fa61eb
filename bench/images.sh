#!/usr/bin/env bash
# bench/images.sh [IMAGE...] prints each Docker image's size and times its
# import into a containerd of its own (docker save | ctr images import, as
# scripts/kube and containerdtest import them): a containerd started for
# the measurement alone (Debian's /usr/bin/containerd, its root, state
# and socket in a temporary directory, no CRI), empty, so that no layer
# is there already; it is stopped and its directory removed at the end.
# Images are measured one after the other, each into an empty root.
#
# Default images: berth/full:dev berth/lsp:dev berth/debug:dev.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
DOCKER=${DOCKER:-/usr/bin/docker}
[ "$#" -gt 0 ] || set -- berth/full:dev berth/lsp:dev berth/debug:dev
command -v containerd >/dev/null || { echo "bench/images.sh: containerd is missing: run scripts/setup" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench/images.sh: run it as root (containerd needs it)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/berth-bench-images.XXXXXX")
pid=
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap 'stop; rm -rf "$dir"' EXIT
now() { date +%s.%N; }

printf '%-28s %12s %10s %12s\n' image size layers import
for img in "$@"; do
  size=$("$DOCKER" image inspect -f '{{.Size}}' "$img") || { echo "bench/images.sh: docker has no image $img: build it with scripts/images" >&2; exit 1; }
  layers=$("$DOCKER" image inspect -f '{{len .RootFS.Layers}}' "$img")
  rm -rf "$dir/root" "$dir/state" && mkdir -p "$dir/root" "$dir/state"
  cat >"$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$dir/containerd.sock"

[ttrpc]
  address = ""
EOF
  containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    [ -S "$dir/containerd.sock" ] && ctr -a "$dir/containerd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  ctr -a "$dir/containerd.sock" version >/dev/null 2>&1 || { echo "bench/images.sh: containerd did not start; its log:" >&2; cat "$dir/containerd.log" >&2; exit 1; }
  sync
  s=$(now)
  "$DOCKER" save "$img" | ctr -a "$dir/containerd.sock" -n bench images import - >/dev/null
  took=$(awk -v a="$s" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }')
  stop
  printf '%-28s %9.0f MB %10s %12s\n' "$img" "$(awk -v s="$size" 'BEGIN { print s / 1e6 }')" "$layers" "$took"
done
