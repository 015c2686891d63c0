"""Apt repositories without add-apt-repository: shipped keys, deb822 sources, apt mirrors."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from accel_images.render import apt
from accel_images.kb.compat import load_kb
from accel_images.errors import InputError


def v4_fingerprint(armored: bytes) -> str:
    """RFC 4880 §12.2: SHA-1 over 0x99, the two-octet length and the body of the public-key packet."""
    body = b"".join(line for line in armored.splitlines()
                    if line and not line.startswith((b"-----", b"=")) and b":" not in line)
    data = base64.b64decode(body)
    tag = data[0]
    assert tag & 0x80, "not an OpenPGP packet"
    if tag & 0x40:  # new format: length octets follow
        first = data[1]
        if first < 192:
            length, offset = first, 2
        elif first < 224:
            length, offset = ((first - 192) << 8) + data[2] + 192, 3
        else:
            length, offset = int.from_bytes(data[2:6], "big"), 6
    else:  # old format: the low two bits say how many length octets
        size = {0: 1, 1: 2, 2: 4}[tag & 0x03]
        length, offset = int.from_bytes(data[1:1 + size], "big"), 1 + size
    packet = data[offset:offset + length]
    return hashlib.sha1(b"\x99" + len(packet).to_bytes(2, "big") + packet).hexdigest().upper()


@pytest.mark.parametrize("name", ["deadsnakes", "kobuk-team-intel-graphics"])
def test_each_shipped_key_carries_the_fingerprint_the_knowledge_base_pins(name: str) -> None:
    repository = apt.Repository.from_kb(name, load_kb().apt_repositories[name])
    assert v4_fingerprint(repository.key_bytes()) == repository.fingerprint


def test_sources_are_deb822_signed_by_the_shipped_key() -> None:
    repository = apt.Repository.from_kb("deadsnakes", load_kb().apt_repositories["deadsnakes"])
    assert repository.sources("ubuntu22.04", ()) == (
        b"Types: deb\nURIs: http://ppa.launchpadcontent.net/deadsnakes/ppa/ubuntu\nSuites: jammy\n"
        b"Components: main\nSigned-By: /etc/apt/keyrings/deadsnakes.asc\n")


def test_an_apt_mirror_serves_the_repository_and_the_base_sources() -> None:
    mirror = apt.AptMirror.parse("ppa.launchpadcontent.net=https://mirror.example.com/launchpad")
    repository = apt.Repository.from_kb("deadsnakes", load_kb().apt_repositories["deadsnakes"])
    assert b"URIs: https://mirror.example.com/launchpad/deadsnakes/ppa/ubuntu\n" in repository.sources("ubuntu24.04",
                                                                                                       (mirror,))
    command = apt.rewrite_command((apt.AptMirror.parse("archive.ubuntu.com=http://mirror.example.com/ubuntu"),))
    assert "sed -i -e 's#https\\?://archive\\.ubuntu\\.com#http://mirror.example.com/ubuntu#g'" in command
    assert apt.rewrite_command(()) == ""


@pytest.mark.parametrize("text", ["archive.ubuntu.com", "=http://x", "a b=http://x", "host=ftp://x", "host=http://x;id"])
def test_bad_apt_mirrors_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="is not HOST=URL"):
        apt.AptMirror.parse(text)


def test_no_image_uses_add_apt_repository_or_removes_the_system_python() -> None:
    from pathlib import Path

    images = Path(__file__).resolve().parents[2] / "images"
    for dockerfile in images.glob("*/*/Dockerfile"):
        text = dockerfile.read_text()
        assert "add-apt-repository" not in text and "software-properties-common" not in text, dockerfile
        assert not re.search(r"apt-get (purge|remove)", text), dockerfile
