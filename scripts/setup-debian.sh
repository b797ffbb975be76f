#!/bin/sh
# Installs what building and testing autofusion needs on Debian 12 (run as root, or with sudo).
# Only Debian packages: the ONNX schema and backend test data come from libonnx-dev/libonnx-testdata.
set -e
pkgs="build-essential clang libclang-rt-14-dev protobuf-c-compiler libprotobuf-c-dev libcjson-dev libonnx-dev libonnx-testdata"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
