#!/bin/sh
# Builds bench/peer/.venv: django-webhook 0.0.15 + Celery with a Redis broker,
# the peer bench/peer/peer_bench.py measures (issue 8). Never committed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python3.11 -m venv "$here/.venv" 2>/dev/null || python3 -m venv "$here/.venv"
"$here/.venv/bin/python" -m pip install -q \
    django-webhook==0.0.15 "celery[redis]==5.7.0" Django==5.2.19 \
    "psycopg[binary]==3.3.9" requests==2.34.2 aiohttp==3.14.5
echo "ready: $here/.venv"
