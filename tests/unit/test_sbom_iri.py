"""The SBOM validator's IRI checks (accel_images.supply.sbom.ascii_iris_as_uris): an ASCII value gets
the answer rfc3987-syntax's parser gives, without that parser; any other value still goes to it.

One known difference, where the parser is wrong: it refuses an IPv6 literal host (`http://[::1]:5000/`),
which RFC 3987's ihost takes as RFC 3986's IP-literal (RFC 3987 section 2.2, RFC 3986 section 3.2.2).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import FormatChecker

from accel_images.supply.sbom import _sbom_validator, ascii_iris_as_uris

ORIGINAL = FormatChecker()   # a checker of its own: the shared Draft 7 one is changed by the SBOM validator
FAST = FormatChecker()
ascii_iris_as_uris(FAST)

SAMPLES = ["https://github.com/accel-images/accel-images", "pkg:pypi/torch@2.13.0%2Bcpu", "//host/path?q#f",
           "relative/path", "", "#frag", "http://exa mple.com", "http://x/%zz",
           "http://x/<y>", "mailto:user@example.com", "urn:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427",
           "http://host:port/", "a:b:c", "1http://x", "http://x/\\y", "http://x/{y}", "?only=query"]


def answers(checker: FormatChecker, name: str, value: str) -> bool:
    return checker.conforms(value, name)


@pytest.mark.parametrize("value", SAMPLES)
@pytest.mark.parametrize("name", ["iri", "iri-reference"])
def test_ascii_values_get_the_parsers_answer(name: str, value: str) -> None:
    assert answers(FAST, name, value) == answers(ORIGINAL, name, value)


@pytest.mark.parametrize("value", ["http://[::1]:5000/v2/", "http://[2001:db8::7]/c"])
def test_an_ipv6_literal_host_is_an_iri_as_rfc_3987_says(value: str) -> None:
    assert answers(FAST, "iri", value) and answers(FAST, "iri-reference", value)
    assert not answers(ORIGINAL, "iri", value)   # the parser's mistake; when it is fixed, drop this line


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="[]"),
               max_size=24))
def test_any_printable_ascii_value_gets_the_parsers_answer(value: str) -> None:
    for name in ("iri", "iri-reference"):
        assert answers(FAST, name, value) == answers(ORIGINAL, name, value), (name, value)


def test_a_non_ascii_value_still_goes_to_the_parser() -> None:
    assert answers(FAST, "iri", "https://例え.jp/パス") and answers(ORIGINAL, "iri", "https://例え.jp/パス")
    assert not answers(FAST, "iri", "https://例え.jp/パ ス")


def test_applying_it_twice_wraps_once() -> None:
    checker = FormatChecker()
    ascii_iris_as_uris(checker)
    wrapped = checker.checkers["iri"][0]
    ascii_iris_as_uris(checker)
    assert checker.checkers["iri"][0] is wrapped


def test_an_ascii_value_never_reaches_the_parser() -> None:
    def parser(instance: object) -> bool:
        raise AssertionError(f"the parser was asked about {instance!r}")

    checker = FormatChecker()
    checker.checkers["iri"] = (parser, ValueError)
    ascii_iris_as_uris(checker)
    assert checker.conforms("https://example.com/a", "iri") and not checker.conforms("https://exa mple.com", "iri")
    with pytest.raises(AssertionError, match="parser was asked"):
        checker.conforms("https://例え.jp/", "iri")


def test_the_sbom_validator_still_refuses_a_bad_url() -> None:
    validator = _sbom_validator()
    good = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1, "externalReferences": [
        {"type": "website", "url": f"https://example.com/{n}"} for n in range(3)]})
    assert validator.validate_str(good) is None
    assert validator.validate_str(good.replace("https://example.com/0", "https://exa mple.com/0")) is not None
