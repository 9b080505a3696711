#!/usr/bin/env bash
# GPU frame time of `terralod render --frames` over the Grand Canyon data at 1920 x 1080 and
# tau = 1 px, three cameras (those of the Q benchmarks in docs/BENCHMARKS.md), for each
# algorithm given. One JSON line per run on stdout, with the adapter's name.
#
# Usage: scripts/gpu-frame-bench.sh TERRALOD GCANYON_PNG FRAMES ALGO...
set -euo pipefail
bin=$1
data=$2
frames=$3
shift 3
mapping=(--cell-size 60 --height-scale 10)
cameras=(
  "overview --eye 122880,40000,160000 --target 122880,0,61440"
  "low-flight --eye 60000,2500,61440 --target 160000,1000,70000"
  "down --eye 122880,20000,61440 --target 122880,0,61441"
)
out=${OUT:-/tmp}
for algo in "$@"; do
  for camera in "${cameras[@]}"; do
    read -r name flags <<<"$camera"
    # shellcheck disable=SC2086
    line=$("$bin" render "$data" "${mapping[@]}" --algo "$algo" $flags --pixel-error 1 \
      --size 1920x1080 --frames "$frames" --out "$out/$algo-$name.png" 2>/dev/null | tail -1)
    echo "{\"camera\":\"$name\",\"run\":$line}"
  done
done
