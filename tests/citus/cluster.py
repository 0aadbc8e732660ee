"""A database of its own on every node of the Citus cluster at CITUS_TEST_URL.

Citus keeps its metadata per database and does not pass CREATE DATABASE on
to the workers, so a test run makes its database on the coordinator and on
each worker, adds the citus extension on every node, then registers the
workers in it; it drops it on every node at the end (WITH (FORCE) ends
Citus's maintenance daemon's session too). The workers are read from the
cluster database the URL names (pg_dist_node), not guessed.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg


@dataclass(frozen=True)
class Node:
    host: str
    port: int

    def dsn(self, url: str, database: str) -> str:
        parts = urlsplit(url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(
            parts._replace(netloc=f"{auth}{self.host}:{self.port}", path=f"/{database}")
        )


def coordinator(url: str) -> Node:
    parts = urlsplit(url)
    return Node(parts.hostname or "127.0.0.1", parts.port or 5432)


def workers(url: str) -> list[Node]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node "
            "WHERE groupid <> 0 AND isactive AND noderole = 'primary' ORDER BY nodeid"
        ).fetchall()
    return [Node(host, port) for host, port in rows]


def new_name() -> str:
    return f"relay_t_{os.getpid()}_{secrets.token_hex(3)}"


def create(url: str, name: str) -> str:
    """Make `name` on every node and register the workers; its URL."""
    head, nodes = coordinator(url), workers(url)
    if not nodes:
        raise RuntimeError(f"no active worker in pg_dist_node of {url}")
    for node in (head, *nodes):
        with psycopg.connect(node.dsn(url, "postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(node.dsn(url, name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    with psycopg.connect(head.dsn(url, name), autocommit=True) as conn:
        conn.execute(
            "SELECT citus_set_coordinator_host(%s, %s)", [head.host, head.port]
        )
        for node in nodes:
            conn.execute("SELECT citus_add_node(%s, %s)", [node.host, node.port])
    return head.dsn(url, name)


def drop(url: str, name: str, nodes: list[Node]) -> None:
    for node in (coordinator(url), *nodes):
        with psycopg.connect(node.dsn(url, "postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
