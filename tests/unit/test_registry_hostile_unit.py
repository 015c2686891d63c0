"""Hostile registry content: whatever a registry serves, reading it gives an image or one RegistryError.

Images are pushed by hand into the real local registry (a config blob and a manifest, written
over HTTP by the test), shaped as no tool would write them: a config that is a string, Labels
as a list, a label that is a number, an index whose entries are not objects. The nightly on
top of it fails that variant alone, with one line, publishes the others and writes the report.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_registry_hostile.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from accel_images.errors import RegistryError
from accel_images.registry import _platform_entry
from nightly_fixture.rawregistry import DOCKER_LIST


@pytest.mark.parametrize("manifests", [["not-an-object"], "a string", [{"platform": "linux", "digest": 1}],
                                       [{"platform": {"os": "linux", "architecture": "amd64"}, "digest": 7}], None])
def test_a_malformed_index_is_one_registry_error(manifests: Any) -> None:
    """The local registry refuses to store such an index, so the index itself is read directly."""
    with pytest.raises(RegistryError) as caught:
        _platform_entry({"mediaType": DOCKER_LIST, "manifests": manifests}, "reg/x:bad")
    assert caught.value.one_line().startswith("reg/x:bad")
