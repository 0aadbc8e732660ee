"""Fixtures for tests that start real dispatcher processes."""

from __future__ import annotations

import pytest

from tests.support.processes import Dispatchers


@pytest.fixture
def dispatchers(transactional_db, tmp_path):
    # Depends on transactional_db so the children are gone before the tables
    # are flushed at teardown.
    started = Dispatchers(tmp_path)
    yield started
    started.close()
