"""One real ``signoff serve`` per module, with the paths policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.paths.scenarios import PathsServer, serve_paths


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PathsServer]:
    """The module's server: everything asks, ``deploy_soon`` expires after two seconds."""
    yield from serve_paths(tmp_path_factory.mktemp("paths"))
