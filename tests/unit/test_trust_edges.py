"""Boundaries of the trust-critical rules that the mutation run (benchmarks/mutation_benches.py) found no
unit test holding: each case sits exactly on the edge a one-character change would move."""

from __future__ import annotations

import pytest

from accel_images.credentials import hide_credentials, shown_userinfo
from accel_images.errors import InputError
from accel_images.publish.retention import RetentionPolicy
from accel_images.supply.trust import other_platform
from accel_images.vendors.gaudi.decision import _behind


def test_retention_may_keep_no_dated_tag_by_count_or_by_age() -> None:
    """0 is a policy (keep none by count; none by age), only a negative number is refused."""
    assert RetentionPolicy(keep=0, keep_days=0).keep == 0
    for bad in ({"keep": -1}, {"keep": 1, "keep_days": -0.5}):
        with pytest.raises(InputError, match="must not be negative"):
            RetentionPolicy(**bad)  # type: ignore[arg-type]


def test_an_empty_userinfo_right_after_the_scheme_is_still_masked() -> None:
    """The '@' at the very start of what follows `scheme://` ends a userinfo too (an empty one)."""
    assert shown_userinfo("https://@127.0.0.1/simple") == ""
    assert hide_credentials("pip index https://@127.0.0.1/simple") == "pip index https://***@127.0.0.1/simple"


@pytest.mark.parametrize("image, host, behind", [
    ("1.24.1", "1.24.1-3bf9e81", None),           # the same release is not behind
    ("1.24.0", "1.24.1-3bf9e81", "a patch release"),
    ("1.23", "1.24.0-3bf9e81", "one release"),    # a two-part release still counts
    ("1.22.0", "1.24.0-3bf9e81", None),
])
def test_how_far_a_gaudi_image_is_behind_the_driver(image: str, host: str, behind: str | None) -> None:
    assert _behind(image, host) == behind


def test_another_platform_shows_a_long_label_cut_and_quoted() -> None:
    """A label from outside is shown whole only when it is short and printable."""
    short = other_platform("linux/arm64", "linux/amd64", "its smoke record")
    assert short is not None and "a 'linux/amd64' image" in short
    long_label = "linux/" + "x" * 60
    said = other_platform("linux/arm64", long_label, "its smoke record")
    assert said is not None and repr(long_label[:40]) in said and long_label not in said
