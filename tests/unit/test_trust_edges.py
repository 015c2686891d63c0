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
            RetentionPolicy(**bad)


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


def test_a_gpu_served_by_its_own_sass_is_an_exact_match_and_one_served_by_a_lower_minors_is_not() -> None:
    """`recommend` prefers an image compiled for the GPU itself (exact_arch) over one that runs it through
    the SASS of a lower minor: an RTX 4090 (8.9) runs the cu130 wheel's sm_86 code, an H100 (9.0) its own."""
    from accel_images.host.recommend import judge
    from accel_images.kb.compat import load_kb
    from accel_images.model.hostinfo import HostInfo
    from accel_images.plan.variants import make_variant

    kb = load_kb()
    variant = make_variant(kb, "cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "runtime")
    def host(cc: str) -> HostInfo:
        return HostInfo(vendor="cuda", driver_version="580.95.05", stack_version="13.0", gpu_names=("GPU",),
                        gpu_archs=(cc,), device_count=1)
    own, lower = judge(host("9.0"), variant, kb), judge(host("8.9"), variant, kb)
    assert own.fits and lower.fits
    assert own.exact_arch is True and lower.exact_arch is False


def test_a_candidate_that_cannot_be_read_back_after_a_stop_is_reported_as_possibly_left() -> None:
    """After a stop cut the candidate's removal short, an unreadable registry is no proof it is gone: the
    report says it may be left (candidate_left), never that it was removed."""
    from accel_images.errors import RegistryError
    from accel_images.publish.promote import Target, _candidate_remains, _Steps

    class Unreadable:
        def manifest_digest(self, repository: str, tag: str) -> str | None:
            raise RegistryError("registry r unreachable (connection refused)")

    class Gone:
        def manifest_digest(self, repository: str, tag: str) -> str | None:
            return None

    steps = _Steps("t-candidate-r1", digest="sha256:" + "a" * 64)
    target = Target("r", "team/pytorch")
    assert _candidate_remains(Unreadable(), target, "t-candidate-r1", steps) is True  # type: ignore[arg-type]
    assert _candidate_remains(Gone(), target, "t-candidate-r1", steps) is False  # type: ignore[arg-type]
    assert _candidate_remains(Unreadable(), target, "t", _Steps("t-candidate-r1")) is False  # type: ignore[arg-type]
