#!/usr/bin/env bash
# Installs the system packages terralod's GPU paths need on a machine without a GPU driver:
# Mesa's software Vulkan (lavapipe) for headless rendering, Xvfb and xauth for the viewer
# test. Debian and Ubuntu (apt-get); elsewhere it says what to install and carries on.
set -euo pipefail

need=()
ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1 || ls /etc/vulkan/icd.d/*.json >/dev/null 2>&1 \
  || need+=(mesa-vulkan-drivers)
command -v xvfb-run >/dev/null 2>&1 || need+=(xvfb)
command -v xauth >/dev/null 2>&1 || need+=(xauth)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-system: please install a Vulkan driver and Xvfb (${need[*]} on Debian)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup-system: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
