"""The image, built once per run for every test of it (tests/support/podman.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import podman


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("image-build")


@pytest.fixture(scope="session")
def relay_image(build_dir):
    """The Containerfile's image under a tag of this run's own, removed after
    (its layers stay in podman's cache for the next build)."""
    tag = f"localhost/{podman.unique('webhook-relay-test')}:test"
    podman.build(tag, workdir=build_dir)
    yield tag
    podman.podman("rmi", "--force", tag, check=False)
