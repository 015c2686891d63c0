"""Property tests: whatever bytes arrive, parse_matrix returns a Matrix or raises InputError.

Anything else (KeyError, TypeError, RecursionError, a YAML library exception) would reach the
user as a traceback. The structured strategies build YAML-ish documents near the real schema,
so the validator's deeper paths are exercised, not only the YAML parser's.
"""

from __future__ import annotations

import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_images.errors import InputError
from accel_images.plan.matrix import GROUP_KEYS, TOP_KEYS, Matrix, parse_matrix

# 150 examples a test a run: each run draws new ones, and the unit suite stays near its 20 s target (README).
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = sorted(TOP_KEYS | GROUP_KEYS | {"name", "uid", "gid", "cpu", "cuda", "rocm", "xpu", "gaudi", "tpu", "<<"})
TRICKY_SCALARS = ["12.10", "13", "2.14", "'2.14'", '"3.11"', "~", "null", "yes", "no", "true", "0", "-1",
                  "65535", "1e400", "0x1F", "0o17", ".inf", ".nan", "2001-02-30", "2001-12-14t21:59:43.10-05:00",
                  "!!int abc", "!!float x", "!!binary '!!'", "!!timestamp nope", "!!bool maybe", "!!str 12.10",
                  "!!null x", "!!set x", "!!omap x", "!!merge x", "!foo bar", "!!python/object:os.system x",
                  "'a; rm -rf /'", '"$(id)"', "'`id`'", '"debian12\\nRUN x"', '"\\t"', "''", "*a", "&a 1",
                  "accel-images/pytorch", "debian12", "runtime", "ubuntu24.04"]


def check(raw: bytes) -> None:
    try:
        result = parse_matrix(raw, "fuzz.yaml")
    except InputError as error:
        assert error.file == "fuzz.yaml"
        assert "\n" not in error.one_line()
        return
    assert isinstance(result, Matrix)


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_give_a_matrix_or_an_input_error(raw: bytes) -> None:
    check(raw)


@FUZZ
@given(st.text(alphabet=string.printable + "\x00\x85\u2028\ufeff\u00e9&*!|>-?:[]{},#%@`'\"", max_size=600))
def test_arbitrary_yaml_punctuation_gives_a_matrix_or_an_input_error(text: str) -> None:
    check(text.encode("utf-8", "surrogatepass"))


def _documents() -> st.SearchStrategy[object]:
    """Nested dicts and lists whose keys are the schema's own names and whose leaves are tricky scalars."""
    leaf = st.sampled_from(TRICKY_SCALARS).map(_Raw) | st.integers(-3, 70000) | st.booleans() | st.none() \
        | st.text(max_size=12)
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5), max_leaves=30)


class _Raw(str):
    """A scalar written verbatim (tags, anchors, aliases), not quoted by the dumper."""


def _flow(value: object) -> str:
    """Flow-style YAML by hand, so raw scalars (tags, anchors, aliases) survive as written."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_flow(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    if isinstance(value, _Raw):
        return str(value)
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def _document(value: object) -> str:
    """A top-level mapping in block style (one key a line, as people write it), the rest in flow style."""
    if isinstance(value, dict):
        return "".join(f"{key}: {_flow(item)}\n" for key, item in value.items())
    return _flow(value) + "\n"


@FUZZ
@given(_documents())
def test_structured_documents_give_a_matrix_or_an_input_error(document: object) -> None:
    check(_document(document).encode())


@FUZZ
@given(st.fixed_dictionaries({
    "schema": st.sampled_from(["1", "2", "'1'", "1.0", "[]"]),
    "image": st.sampled_from(["accel-images/pytorch", "'Bad Name'", "{}", "!!int x"]),
}), st.dictionaries(st.sampled_from(["cpu", "cuda", "rocm", "tpu"]), st.lists(
    st.dictionaries(st.sampled_from(sorted(GROUP_KEYS) + ["pythons"]),
                    st.lists(st.sampled_from(TRICKY_SCALARS), max_size=3), max_size=6), max_size=3), max_size=3))
def test_near_valid_matrices_give_a_matrix_or_an_input_error(top: dict[str, str],
                                                             vendors: dict[str, list[dict[str, list[str]]]]) -> None:
    lines = [f"schema: {top['schema']}", f"image: {top['image']}", "vendors:"]
    for vendor, groups in vendors.items():
        lines.append(f"  {vendor}:")
        for group in groups:
            lines.append("    - {" + ", ".join(f"{axis}: [{', '.join(values)}]" for axis, values in group.items()) + "}")
    check("\n".join(lines).encode())


def test_a_well_formed_matrix_passes_the_same_check() -> None:
    """The property is not vacuous: a valid document does come back as a Matrix."""
    raw = (b"schema: 1\nimage: accel-images/pytorch\nvendors:\n  cpu:\n"
           b"    - {torch: ['2.14'], python: ['3.11'], os: [debian12], flavor: [runtime]}\n")
    assert isinstance(parse_matrix(raw, "fuzz.yaml"), Matrix)
