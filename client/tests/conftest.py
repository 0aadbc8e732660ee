"""Fixtures for the client's own tests: scripted servers on 127.0.0.1."""

from __future__ import annotations

import socket

import pytest
from relay_stub import Sleeps, serving


@pytest.fixture
def stub():
    with serving() as server:
        yield server


@pytest.fixture
def other_stub():
    with serving() as server:
        yield server


@pytest.fixture
def silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
