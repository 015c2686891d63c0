"""Hostile registry content: whatever a registry serves, reading it gives an image or one RegistryError.

Images are pushed by hand into the real local registry (a config blob and a manifest, written
over HTTP by the test), shaped as no tool would write them: a config that is a string, Labels
as a list, a label that is a number, an index whose entries are not objects. The nightly on
top of it fails that variant alone, with one line, publishes the others and writes the report.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_registry_hostile.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from accel_images import registry, untrusted
from accel_images.errors import MalformedAnswer, RegistryError
from accel_images.publish import catalogue
from accel_images.publish.tested import RECORD_LABEL, SmokedRecord
from accel_images.registry import index_entries
from accel_images.smoke.judge import last_json_object
from accel_images.supply import attach
from nightly_fixture.rawregistry import DOCKER_LIST


@pytest.mark.parametrize("manifests", [["not-an-object"], "a string", [{"platform": "linux", "digest": 1}],
                                       [{"platform": {"os": "linux", "architecture": "amd64"}, "digest": 7}], None,
                                       [{"platform": {"os": "linux", "architecture": "amd64"},
                                         "digest": "sha256:" + "a" * 64}]])
def test_a_malformed_index_is_one_registry_error(manifests: Any) -> None:
    """The local registry refuses to store such an index, so the index itself is read directly."""
    with pytest.raises(RegistryError) as caught:
        index_entries({"mediaType": DOCKER_LIST, "manifests": manifests}, "reg/x:bad")
    assert caught.value.one_line().startswith("reg/x:bad")


# ---- JSON nested past any parser's stack, and answers of the wrong shape ---------------------------

DEEP = "[" * 100_000 + "]" * 100_000
"""Far past Python's recursion limit: json.loads raises RecursionError on it, which no caller catches."""


def test_json_nested_too_deep_is_a_value_error_before_the_parser_recurses() -> None:
    with pytest.raises(ValueError, match="nested 100000 levels deep"):
        untrusted.loads(DEEP)
    assert untrusted.json_depth('{"a": ["[[[{{{", {"b": "\\\\\\"]"}]}') == 3   # brackets in strings do not count
    assert untrusted.loads("[" * 64 + "]" * 64) is not None


@pytest.mark.parametrize(("document", "problem"), [
    ({"layers": [{"digest": "sha256:" + "a" * 64, "size": "12"}]}, "layers[0].size is a string, not a size"),
    ({"layers": {"digest": 1}}, "layers is an object, not a list"),
    ({"config": {"digest": "sha256 short"}}, "config.digest is 'sha256 short', not a digest"),
    ({"config": {"digest": "sha256:" + "a" * 64 + "\n", "size": 1}},
     "config.digest is 'sha256:" + "a" * 64 + "\\n', not a digest"),
    ({"config": {"digest": "sha256:" + "a" * 64, "size": -1}}, "config.size is negative, not a size"),
    ({"schemaVersion": 1, "fsLayers": []}, "schemaVersion is 1, not 2"),
    ({"schemaVersion": 2, "layers": []}, "config is missing"),
    ({"annotations": {"a": 1}}, "annotations['a'] is a number, not a string"),
    ({"manifests": [{"platform": "linux/amd64"}]}, "manifests[0].platform is a string, not an object"),
])
def test_a_manifest_of_the_wrong_shape_is_one_permanent_error_naming_the_field(document: Any, problem: str) -> None:
    with pytest.raises(MalformedAnswer) as caught:
        registry.parse(json.dumps(document).encode(), "while reading x:y", registry.MANIFEST)
    assert caught.value.one_line() == f"the registry answered a manifest whose {problem} while reading x:y"
    assert caught.value.exit_code == 4 and caught.value.transient is False


def test_a_deeply_nested_tested_record_lists_nothing() -> None:
    assert SmokedRecord.from_labels({RECORD_LABEL: DEEP}) == SmokedRecord()


def test_a_deeply_nested_catalogue_record_vouches_for_nothing() -> None:
    class Store:
        def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]]:
            return "sha256:" + "1" * 64, {"artifactType": catalogue.ARTIFACT_TYPE, "annotations": {
                f"{catalogue.RECORD_PREFIX}.ok": "true", catalogue.LABELS_ANNOTATION: DEEP}}
    assert catalogue.read_record(Store(), "r", "sha256-1.smoke") is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "problem"), [({"manifests": 5}, "manifests is a number, not a list"),
                                                  ({"manifests": ["x"]}, "manifests[0] is a string, not an object")])
def test_a_referrers_list_of_the_wrong_shape_is_malformed_not_a_traceback(answer: Any, problem: str) -> None:
    class Store:
        def referrers(self, repository: str, digest: str) -> dict[str, Any]:
            return answer
    with pytest.raises(MalformedAnswer, match=re.escape(problem)):
        attach.referrers(Store(), "r", "sha256:" + "1" * 64)  # type: ignore[arg-type]


def test_a_smoke_report_nested_too_deep_is_no_report() -> None:
    assert last_json_object('{"schema": 1, "x": ' + DEEP + "}") is None


# ---- where a tag list's next page may lead (the trust edges of the login) ---------------------------

class ScriptedRegistry(registry.RegistryClient):
    """The real client against a registry that wants Basic auth and answers every tag list with `link`;
    each request sent is recorded with the Authorization it carried.

    Not the shared in-memory registry (tests/fakes.py InMemoryRegistry) on purpose: that one answers as
    the distribution registry does, and these tests need a hostile one, whose next page leads to another
    host, scheme or repository, to show what the client refuses to follow."""

    def __init__(self, scheme: str, link: str) -> None:
        super().__init__("reg.example", scheme=scheme, credentials=lambda host: {"username": "u", "password": "p"})
        self.link = link
        self.sent: list[tuple[str, str | None]] = []

    def _send(self, method: str, url: str, headers: Any, data: Any, authorization: str | None, what: str) -> Any:
        from fakes import http_answer
        self.sent.append((url, authorization))
        if authorization is None:
            return http_answer(method, url, 401, b"{}", {"WWW-Authenticate": 'Basic realm="reg"'})
        return http_answer(method, url, 200, json.dumps({"name": "team/img", "tags": ["a"]}).encode(),
                       {"Link": self.link})


def test_an_https_registrys_next_page_over_http_gets_neither_the_request_nor_the_login() -> None:
    """The same host, but plain http: the login (and the request) would cross the network unencrypted."""
    client = ScriptedRegistry("https", '<http://reg.example/v2/team/img/tags/list?n=1&last=a>; rel="next"')
    with pytest.raises(MalformedAnswer, match=r"the tag list's next page is on another host \(http://reg.example\)"):
        client.tags("team/img")
    assert [url for url, _ in client.sent] == ["https://reg.example/v2/team/img/tags/list?n=1000"] * 2
    assert all(url.startswith("https://") for url, auth in client.sent if auth is not None)


def test_a_next_page_in_another_repository_is_not_followed() -> None:
    client = ScriptedRegistry("https", '</v2/library/debian/tags/list?n=1000>; rel="next"')
    with pytest.raises(MalformedAnswer) as caught:
        client.tags("team/img")
    assert caught.value.one_line().startswith("reg.example/team/img: the tag list's next page (/v2/library/debian/"
                                              "tags/list) is not the tag list of team/img")
    assert {url for url, _ in client.sent} == {"https://reg.example/v2/team/img/tags/list?n=1000"}
