#!/usr/bin/env bash
# Regenerates proto/heron_py_pb2.py (and .pyi) from proto/heron_py.proto.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -Iproto --python_out=proto --pyi_out=proto proto/heron_py.proto
