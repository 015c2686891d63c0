"""The SBOM of an image: its dpkg database and its Python environment, as CycloneDX JSON.

The inventory is read inside the image itself (accel_images.supply.probe, run in a throw-away
container with no network), so it lists what the image holds, not what the Dockerfile asked
for: torch with its local version label (`2.13.0+cpu`, `2.14.0+cu132`), the vendor runtime
wheels beside it, and every Debian/Ubuntu package. The document is built and validated with
cyclonedx-python-lib (the CycloneDX project's own library), never written by hand, so other
CycloneDX tools read it.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.contrib.this.builders import this_component as cyclonedx_library
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion
from packageurl import PackageURL

from accel_images import untrusted
from accel_images.errors import AccelError
from accel_images.model.wheels import Wheel
from accel_images.smoke.launcher import ContainerRunner  # the engine interface the smoke launcher runs with

SPEC_VERSION = SchemaVersion.V1_6
MEDIA_TYPE = "application/vnd.cyclonedx+json"
"""The CycloneDX JSON media type (IANA registration, cyclonedx.org/specification/overview)."""
PROBE = Path(__file__).with_name("probe.py")
PROBE_TIMEOUT_S = 180.0
PROPERTY_PREFIX = "accel-images:"
_NORMALIZE = re.compile(r"[-_.]+")


class SbomError(AccelError):
    """The image could not be inventoried (the probe failed or printed nothing usable)."""

    exit_code = 1


@dataclass(frozen=True)
class Package:
    """One installed package: `deb` (dpkg) or `pypi` (a Python distribution)."""

    kind: str
    name: str
    version: str
    arch: str = ""
    source: str = ""


@dataclass(frozen=True)
class Inventory:
    """What the probe found in one image."""

    os_id: str
    os_version: str
    python_version: str
    packages: tuple[Package, ...]

    def version_of(self, kind: str, name: str) -> str | None:
        wanted = normalize(name) if kind == "pypi" else name
        for package in self.packages:
            if package.kind == kind and (normalize(package.name) if kind == "pypi" else package.name) == wanted:
                return package.version
        return None


@dataclass(frozen=True)
class Subject:
    """The image an SBOM describes: repository (host/path), tag and manifest digest."""

    repository: str
    tag: str
    digest: str


def normalize(name: str) -> str:
    """A Python distribution name as PEP 503 and the pypi purl type spell it."""
    return _NORMALIZE.sub("-", name).lower()


def inventory(engine: ContainerRunner, image: str) -> Inventory:
    """Run the probe in `image` (no network, the entry-point guard off) and parse what it printed."""
    result = engine.run(image, ["python", "-c", PROBE.read_text()], timeout_s=PROBE_TIMEOUT_S,
                        options={"network_disabled": True, "environment": {"ACCEL_IMAGES_GUARD": "off"},
                                 "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"]},
                        labels={"io.accel-images.sbom": "true"})
    if result.timed_out or result.exit_code != 0:
        tail = " ".join((result.stderr or result.stdout).split())[-300:]
        raise SbomError(f"SBOM probe in {image} exited {result.exit_code}"
                        + (" (timed out)" if result.timed_out else "") + f": {tail or 'no output'}")
    return parse_probe(result.stdout, image)


def parse_probe(stdout: str, image: str = "the image") -> Inventory:
    """The probe's JSON line as an Inventory."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        data = untrusted.loads(lines[-1])
        packages = [Package("deb", p["name"], p["version"], p.get("arch", ""), p.get("source", ""))
                    for p in data["dpkg"]]
        packages += [Package("pypi", p["name"], p["version"]) for p in data["python"]["packages"]]
        return Inventory(data["os"]["id"], data["os"]["version_id"], data["python"]["version"],
                         tuple(sorted(set(packages), key=lambda p: (p.kind, p.name.lower(), p.version))))
    except (IndexError, ValueError, KeyError, TypeError) as error:
        raise SbomError(f"SBOM probe in {image} printed no usable inventory ({type(error).__name__})") from None


def purl(package: Package, inventory: Inventory) -> PackageURL:
    """`pkg:deb/debian/bash@5.2.15-2+b7?arch=amd64&distro=debian-12`, `pkg:pypi/torch@2.13.0%2Bcpu`."""
    if package.kind == "pypi":
        return PackageURL("pypi", name=normalize(package.name), version=package.version)
    qualifiers = {"arch": package.arch} if package.arch else {}
    if inventory.os_id:
        qualifiers["distro"] = f"{inventory.os_id}-{inventory.os_version}" if inventory.os_version else inventory.os_id
    return PackageURL("deb", namespace=inventory.os_id or None, name=package.name, version=package.version,
                      qualifiers=qualifiers or None)


def image_purl(subject: Subject) -> PackageURL:
    """`pkg:oci/pytorch@sha256:...?repository_url=host/path/pytorch&tag=...` (the purl spec's oci type)."""
    name = subject.repository.rsplit("/", 1)[-1]
    return PackageURL("oci", name=name, version=subject.digest,
                      qualifiers={"repository_url": subject.repository, "tag": subject.tag})


def wheel_of(package: Package, wheels: Mapping[tuple[str, str], Wheel]) -> Wheel | None:
    """The wheel the run fetched for an installed Python distribution (same name, same version), if any."""
    if package.kind != "pypi":
        return None
    return wheels.get((normalize(package.name), package.version))


def wheel_details(wheel: Wheel | None) -> tuple[list[HashType], list[Property]]:
    """The hash of the file that was installed and the index that served it, for the distribution's
    component: what `pip install` took is then named to the byte (the NVIDIA CUDA libraries are wheels)."""
    if wheel is None:
        return [], []
    return ([HashType(alg=HashAlgorithm.SHA_256, content=wheel.sha256)],
            [Property(name=PROPERTY_PREFIX + "wheel", value=wheel.filename),
             Property(name=PROPERTY_PREFIX + "index", value=wheel.index_url)])


def build_bom(inventory: Inventory, subject: Subject, *, serial: uuid.UUID | None = None,
              timestamp: datetime | None = None, wheels: Iterable[Wheel] = ()) -> Bom:
    """The CycloneDX model: the image as metadata.component, every package a component of it; a Python
    distribution installed from a wheel the run fetched carries that file's sha256 and its index."""
    fetched = {(normalize(wheel.name), wheel.version): wheel for wheel in wheels}
    root = Component(name=subject.repository, version=subject.tag, type=ComponentType.CONTAINER,
                     bom_ref=str(image_purl(subject)), purl=image_purl(subject),
                     hashes=[HashType(alg=HashAlgorithm.SHA_256, content=subject.digest.split(":", 1)[-1])],
                     properties=[Property(name=PROPERTY_PREFIX + "os",
                                          value=f"{inventory.os_id} {inventory.os_version}".strip()),
                                 Property(name=PROPERTY_PREFIX + "python", value=inventory.python_version)])
    components = []
    for package in inventory.packages:
        url = purl(package, inventory)
        properties = [Property(name=PROPERTY_PREFIX + "source-package", value=package.source)] if package.source else []
        hashes, wheel_properties = wheel_details(wheel_of(package, fetched))
        components.append(Component(name=package.name, version=package.version, type=ComponentType.LIBRARY,
                                    bom_ref=str(url), purl=url, properties=properties + wheel_properties,
                                    hashes=hashes))
    metadata = BomMetaData(component=root, timestamp=timestamp) if timestamp else BomMetaData(component=root)
    metadata.tools.components.update(tools())
    bom = Bom(components=components, metadata=metadata, serial_number=serial or uuid.uuid4())
    bom.register_dependency(root, components)
    return bom


def tools() -> list[Component]:
    """metadata.tools: what wrote the SBOM (an NTIA minimum element: who authored the data), so a
    reader can tell an inventory this tool took inside the image from one a scanner guessed."""
    from accel_images import __version__
    return [Component(name="accel-images", version=__version__, type=ComponentType.APPLICATION,
                      bom_ref=f"accel-images@{__version__}"), cyclonedx_library()]


def bom_json(inventory: Inventory, subject: Subject, **kwargs: Any) -> str:
    """The SBOM as CycloneDX JSON, checked against the bundled CycloneDX schema before it is used."""
    text = make_outputter(build_bom(inventory, subject, **kwargs), OutputFormat.JSON, SPEC_VERSION).output_as_string(
        indent=1)
    problem = _sbom_validator().validate_str(text)
    if problem is not None:
        raise SbomError(f"the SBOM of {subject.repository}@{subject.digest[:19]} fails the CycloneDX"
                        f" {SPEC_VERSION.to_version()} schema: {problem}")
    return text


@functools.lru_cache(maxsize=1)
def _sbom_validator() -> Any:
    """CycloneDX's strict JSON validator, made once a process (it reads five schema files).

    Imported here: the validator's import builds jsonschema's URI grammars (about 1.3 s), which a
    nightly with nothing to push would otherwise pay at start-up (benchmarks/RESULTS.md, noop).
    """
    from cyclonedx.validation.json import JsonStrictValidator
    from jsonschema import Draft7Validator
    ascii_iris_as_uris(Draft7Validator.FORMAT_CHECKER)
    return JsonStrictValidator(SPEC_VERSION)


def ascii_iris_as_uris(checker: Any) -> None:
    """Check an ASCII `iri` or `iri-reference` with the checker's own `uri` or `uri-reference` check.

    jsonschema checks IRIs with rfc3987-syntax's Earley parser, about 0.1 s a value
    (python-jsonschema/jsonschema#1392), so the SBOM's eight or so URLs cost most of a second an image.
    RFC 3987 section 2.2 defines an IRI as RFC 3986's URI grammar with non-ASCII characters allowed in
    places (ucschar, iprivate); an ASCII string is therefore an IRI(-reference) exactly when it is a
    URI(-reference), which jsonschema checks with rfc3986-validator's expression in microseconds. A
    string with other characters still goes to the original check. Idempotent (CycloneDX validates with
    jsonschema's shared Draft 7 checker, so this changes that checker for the process).
    """
    for iri, uri in (("iri", "uri"), ("iri-reference", "uri-reference")):
        if iri not in checker.checkers or uri not in checker.checkers:
            continue   # that check is not installed: nothing to speed up
        original, raises = checker.checkers[iri]
        if getattr(original, "ascii_as_uri", False):
            continue
        as_uri = checker.checkers[uri][0]

        def check(instance: object, original: Any = original, as_uri: Any = as_uri) -> bool:
            if isinstance(instance, str) and instance.isascii():
                return bool(as_uri(instance))
            return bool(original(instance))

        check.ascii_as_uri = True  # type: ignore[attr-defined]
        checker.checkers[iri] = (check, raises)
