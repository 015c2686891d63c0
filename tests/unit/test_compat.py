"""The compatibility knowledge base against /work/shared/docs/compat-facts.md.

FACTS is the table: each row is one statement of the facts sheet (section in the id), the
question put to the knowledge base, and the answer the sheet gives. The rest checks that every
row of the knowledge base (accel_images/data/kb.yaml and each vendor's section under
accel_images/data/vendors/) is well-formed and sourced, and the query API's edges.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pytest
import yaml

from accel_images import resources, vendors
from accel_images.kb.compat import DATA_FILE, KnowledgeBase, load_kb, parse_query
from accel_images.model.knowledge import OsInfo, version_matches
from accel_images.versions import parse as vkey, sort_versions
from accel_images.errors import IncompatibleError, InputError

VERSION = re.compile(r"^\d+(\.\d+){0,3}$")
URL = re.compile(r"^https://[^\s]+$")


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load((resources.kb_dir() / DATA_FILE.name).read_text(encoding="utf-8"))


def section(name: str) -> dict[str, Any]:
    """A vendor's knowledge-base file, as written."""
    return yaml.safe_load(vendors.get(name).kb_file.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cuda_raw() -> dict[str, Any]:
    return section("cuda")


def cuda(minor: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: kb.stacks("cuda", minor)


def rocm(minor: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: kb.stacks("rocm", minor)


def python_range(minor: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: (kb.release(minor).python[0], kb.release(minor).python[-1])


def ok(**query: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: kb.check(query).ok


def driver(toolkit: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: kb.facts("cuda").driver_min(toolkit)


def gaudi_torch(release: str) -> Callable[[KnowledgeBase], Any]:
    return lambda kb: kb.facts("gaudi")[release].torch


FACTS: list[tuple[str, Callable[[KnowledgeBase], Any], Any]] = [
    # §1.1 torch minor -> CUDA wheel indexes
    ("1.1 2.0 CUDA 11.7, 11.8", cuda("2.0"), ("11.7", "11.8")),
    ("1.1 2.1 CUDA 11.8, 12.1", cuda("2.1"), ("11.8", "12.1")),
    ("1.1 2.3 CUDA 11.8, 12.1", cuda("2.3"), ("11.8", "12.1")),
    ("1.1 2.4 CUDA 11.8, 12.1, 12.4", cuda("2.4"), ("11.8", "12.1", "12.4")),
    ("1.1 2.5 CUDA 11.8, 12.1, 12.4", cuda("2.5"), ("11.8", "12.1", "12.4")),
    ("1.1 2.6 CUDA 11.8, 12.4, 12.6", cuda("2.6"), ("11.8", "12.4", "12.6")),
    ("1.1 2.7 CUDA 11.8, 12.6, 12.8", cuda("2.7"), ("11.8", "12.6", "12.8")),
    ("1.1 2.8 CUDA 12.6, 12.8, 12.9", cuda("2.8"), ("12.6", "12.8", "12.9")),
    ("1.1 2.9 CUDA 12.6, 12.8, 13.0", cuda("2.9"), ("12.6", "12.8", "13.0")),
    ("1.1 2.11 CUDA 12.6, 12.8, 13.0", cuda("2.11"), ("12.6", "12.8", "13.0")),
    ("1.1 2.12 CUDA 12.6, 13.0, 13.2 (12.8 dropped)", cuda("2.12"), ("12.6", "13.0", "13.2")),
    ("1.1 2.14 CUDA 12.6, 13.0, 13.2", cuda("2.14"), ("12.6", "13.0", "13.2")),
    ("1.1 cu118 dropped in 2.8", ok(torch="2.8", cuda="11.8"), False),
    ("1.1 cu118 still in 2.7", ok(torch="2.7.1", cuda="11.8"), True),
    ("1.1 torch 2.4.1 + CUDA 12.4", ok(torch="2.4.1", cuda="12.4", python="3.11"), True),
    # §1.1 / §4.1 torch minor -> ROCm builds
    ("1.1 2.0 ROCm 5.4.2", rocm("2.0"), ("5.4.2",)),
    ("1.1 2.1 ROCm 5.6", rocm("2.1"), ("5.6",)),
    ("4.1 2.2 ROCm 5.6 (2.2.0) and 5.7 (2.2.1+)", rocm("2.2"), ("5.6", "5.7")),
    ("1.1 2.3 ROCm 6.0", rocm("2.3"), ("6.0",)),
    ("4.1 2.5 ROCm 6.1, 6.2", rocm("2.5"), ("6.1", "6.2")),
    ("4.1 2.6 ROCm 6.1, 6.2.4", rocm("2.6"), ("6.1", "6.2.4")),
    ("1.1 2.7 ROCm 6.3", rocm("2.7"), ("6.3",)),
    ("4.1 2.9 ROCm 6.4", rocm("2.9"), ("6.4",)),
    ("4.1 2.10 ROCm 7.1", rocm("2.10"), ("7.1",)),
    ("4.1 2.13 ROCm 7.2", rocm("2.13"), ("7.2",)),
    ("4.1 ROCm 7.2 builds 2.11-2.13", lambda kb: kb.torch_for_stack("rocm", "7.2"), ["2.11", "2.12", "2.13"]),
    ("4.1 ROCm 7.14 only for 2.14", lambda kb: kb.torch_for_stack("rocm", "7.14"), ["2.14"]),
    ("1.1 torch 2.1 has no ROCm 6.2", ok(torch="2.1", rocm="6.2"), False),
    ("4.1 ROCm 6.2 asks for 6.2.x: torch 2.6 has 6.2.4", ok(torch="2.6", rocm="6.2"), True),
    # §1.1 Python ranges (stable, not experimental)
    ("1.1 2.0 Python 3.8-3.11", python_range("2.0"), ("3.8", "3.11")),
    ("1.1 2.4 Python 3.8-3.12", python_range("2.4"), ("3.8", "3.12")),
    ("1.1 2.5 Python 3.9-3.12", python_range("2.5"), ("3.9", "3.12")),
    ("1.1 2.6 Python 3.9-3.13", python_range("2.6"), ("3.9", "3.13")),
    ("1.1 2.8 Python 3.9-3.13", python_range("2.8"), ("3.9", "3.13")),
    ("1.1 2.9 Python 3.10-3.14", python_range("2.9"), ("3.10", "3.14")),
    ("1.1 2.14 Python 3.10-3.14 (builder rule)", python_range("2.14"), ("3.10", "3.14")),
    ("1.1 3.15 only experimental on 2.13", lambda kb: kb.release("2.13").python_experimental, ("3.15",)),
    ("8 Python 3.9 dropped in 2.9", ok(torch="2.9", cuda="12.6", python="3.9"), False),
    ("8 Python 3.8 dropped in 2.5", ok(torch="2.5", python="3.8"), False),
    ("8 Python 3.13 from 2.6", ok(torch="2.6", python="3.13"), True),
    # §5.1 XPU binaries: 2.4 none, from 2.5
    ("5.1 2.4 no XPU binaries", lambda kb: kb.stacks("xpu", "2.4"), ()),
    ("5.1 2.5 XPU yes", lambda kb: bool(kb.stacks("xpu", "2.5")), True),
    ("5.1 2.6 XPU oneAPI 2025.0", lambda kb: kb.stacks("xpu", "2.6"), ("2025.0",)),
    ("5.1 2.8 XPU oneAPI 2025.1", lambda kb: kb.stacks("xpu", "2.8"), ("2025.1",)),
    ("5.1 2.9 XPU oneAPI 2025.2", lambda kb: kb.stacks("xpu", "2.9"), ("2025.2",)),
    ("5.1 2.10-2.12 XPU oneAPI 2025.3", lambda kb: kb.torch_for_stack("xpu", "2025.3"), ["2.10", "2.11", "2.12"]),
    ("5.1 2.13 XPU oneAPI 2026.0", lambda kb: kb.stacks("xpu", "2.13"), ("2026.0",)),
    ("5.1 2.14 XPU oneAPI 2026.1", lambda kb: kb.stacks("xpu", "2.14"), ("2026.1",)),
    # a release newer than the facts is marked unverified for XPU (kb.yaml as_of), never left silent
    ("5.1 every torch >= 2.5 has XPU",
     lambda kb: all(kb.stacks("xpu", m) or m in kb.section("xpu").unverified
                    for m in kb.torch_minors() if vkey(m) >= (2, 5)), True),
    # §2.1 CUDA toolkit -> minimum Linux driver
    ("2.1 11.8 GA 520.61.05", driver("11.8.0"), "520.61.05"),
    ("2.1 12.0 GA 525.60.13", driver("12.0.0"), "525.60.13"),
    ("2.1 12.4 GA 550.54.14", driver("12.4.0"), "550.54.14"),
    ("2.1 12.6 Update 3 560.35.05", driver("12.6.3"), "560.35.05"),
    ("2.1 12.8 Update 1 570.124.06", driver("12.8.1"), "570.124.06"),
    ("2.1 13.0 GA 580.65.06", driver("13.0.0"), "580.65.06"),
    ("2.1 13.0 Update 2 580.95.05", driver("13.0.2"), "580.95.05"),
    ("2.1 13.2 Update 1 595.58.03", driver("13.2.1"), "595.58.03"),
    ("2.3 cu126 wheel is toolkit 12.6.3", lambda kb: kb.facts("cuda").toolkit("2.14", "12.6"), "12.6.3"),
    ("2.3 cu132 wheel is toolkit 13.2.1", lambda kb: kb.facts("cuda").toolkit("2.14", "13.2"), "13.2.1"),
    ("2.3 cu130 in 2.12+ is 13.0.2", lambda kb: kb.facts("cuda").toolkit("2.12", "13.0"), "13.0.2"),
    # §2.2 minor-version-compatibility floors
    ("2.2 MVC floor CUDA 12.x 525.60.13", lambda kb: kb.facts("cuda").mvc_floor("12.6"), "525.60.13"),
    ("2.2 MVC floor CUDA 12.1 525.60.13", lambda kb: kb.facts("cuda").mvc_floor("12.1"), "525.60.13"),
    ("2.2 MVC floor CUDA 13.x 580", lambda kb: kb.facts("cuda").mvc_floor("13.2"), "580"),
    ("2.2 MVC floor CUDA 13.0 580", lambda kb: kb.facts("cuda").mvc_floor("13.0"), "580"),
    ("2.2 MVC floor CUDA 11.x 450.80.02", lambda kb: kb.facts("cuda").mvc_floor("11.8"), "450.80.02"),
    # §1.3 architectures
    ("1.3 cu13x wheels start at compute 7.5", lambda kb: kb.gpu_archs("cuda", "2.14", "13.2")[0], "7.5"),
    ("1.3 cu126 in 2.12+ covers 5.0-9.0", lambda kb: kb.gpu_archs("cuda", "2.13", "12.6"),
     ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")),
    ("1.3 2.11 cu128 dropped Volta", lambda kb: "7.0" in kb.gpu_archs("cuda", "2.11", "12.8"), False),
    ("1.3 2.10 cu128 still has Volta", lambda kb: "7.0" in kb.gpu_archs("cuda", "2.10", "12.8"), True),
    ("4.2 ROCm >= 7.0 adds gfx950", lambda kb: "gfx950" in kb.gpu_archs("rocm", "2.14", "7.14"), True),
    ("4.2 ROCm 6.4 lacks gfx950", lambda kb: "gfx950" in kb.gpu_archs("rocm", "2.9", "6.4"), False),
    # §6.1 / §9 Intel Gaudi software -> bundled torch
    ("6.1 Gaudi 1.16 -> torch 2.2.2", gaudi_torch("1.16.0"), "2.2.2"),
    ("6.1 Gaudi 1.17 -> torch 2.3.1", gaudi_torch("1.17.0"), "2.3.1"),
    ("6.1 Gaudi 1.18 -> torch 2.4.0", gaudi_torch("1.18.0"), "2.4.0"),
    ("6.1 Gaudi 1.19 -> torch 2.5.1", gaudi_torch("1.19.0"), "2.5.1"),
    ("6.1 Gaudi 1.21 -> torch 2.6.0", gaudi_torch("1.21.0"), "2.6.0"),
    ("6.1 Gaudi 1.22 -> torch 2.7.1", gaudi_torch("1.22.0"), "2.7.1"),
    ("6.1 Gaudi 1.23.0 -> torch 2.9.0", gaudi_torch("1.23.0"), "2.9.0"),
    ("6.1 Gaudi 1.24.0 -> torch 2.10.0", gaudi_torch("1.24.0"), "2.10.0"),
    ("6.1 Gaudi 1.24.1 -> torch 2.11.0", gaudi_torch("1.24.1"), "2.11.0"),
    ("6.1 torch 2.11 is Gaudi 1.24.1", lambda kb: kb.stacks("gaudi", "2.11"), ("1.24.1",)),
    ("6.1 Gaudi 1.24.1 does not bundle 2.14", ok(torch="2.14", gaudi="1.24.1"), False),
    ("6.1 Gaudi 22.04 ships Python 3.10", ok(torch="2.11", gaudi="1.24.1", python="3.10"), True),
    ("6.1 Gaudi ships no Python 3.11 on 1.24.1", ok(torch="2.11", gaudi="1.24.1", python="3.11"), False),
    ("6.1 Gaudi 24.04 from 1.18 (Python 3.12)", lambda kb: kb.facts("gaudi")["1.18.0"].os_python.get("ubuntu24.04"), "3.12"),
    ("6.1 Gaudi 1.17 has no 24.04 image", lambda kb: "ubuntu24.04" in kb.facts("gaudi")["1.17.0"].os_python, False),
    # §8.13 version ordering: ROCm 7.2 < 7.14 < 10.0, never floats
    ("8.13 7.2 < 7.14 < 10.0", lambda kb: sort_versions(["10.0", "7.14", "7.2"]), ["7.2", "7.14", "10.0"]),
    ("8.13 12.10 > 12.9", lambda kb: vkey("12.10") > vkey("12.9"), True),
    # §1.4 glibc: torch >= 2.6 wheels need glibc 2.28
    ("1.4 2.6 needs glibc 2.28", lambda kb: kb.release("2.6").glibc_min, "2.28"),
    ("1.4 2.14 needs glibc 2.28", lambda kb: kb.release("2.14").glibc_min, "2.28"),
    ("1.4 2.5 has no glibc floor", lambda kb: kb.release("2.5").glibc_min, None),
    # §1.1 patch releases
    ("1.1 2.12 patch 2.12.1 is the newest", lambda kb: kb.resolve_torch("2.12"), "2.12.1"),
    ("1.1 2.6.1 was never released", ok(torch="2.6.1", cuda="12.6"), False),
]


@pytest.mark.parametrize("question, expected", [(f[1], f[2]) for f in FACTS], ids=[f[0] for f in FACTS])
def test_fact_from_compat_facts(kb: KnowledgeBase, question: Callable[[KnowledgeBase], Any], expected: Any) -> None:
    assert question(kb) == expected


def test_fact_table_is_big_enough() -> None:
    assert len(FACTS) >= 30


# -- the glibc rule, on an OS the shipped data does not list ------------------------------

def test_glibc_rule_rejects_an_old_os_for_new_torch_only(kb: KnowledgeBase) -> None:
    old = OsInfo("ubuntu18.04", "ubuntu:18.04", "3.6", "2.27", "ubuntu", ("3.8", "3.9", "3.10", "3.11"))
    rules = kb.section("cpu").rules
    cpu = dataclasses.replace(kb.section("cpu"), rules=dataclasses.replace(rules, os=(*rules.os, "ubuntu18.04")))
    patched = dataclasses.replace(kb, os={**kb.os, "ubuntu18.04": old}, sections={**kb.sections, "cpu": cpu})
    reasons = patched.why_not("cpu", None, "2.6", "3.10", "ubuntu18.04", "runtime")
    assert reasons == ["torch 2.6 wheels need glibc >= 2.28; ubuntu18.04 has 2.27"]
    assert patched.why_not("cpu", None, "2.5", "3.10", "ubuntu18.04", "runtime") == []


def test_every_shipped_os_meets_the_glibc_floor(kb: KnowledgeBase) -> None:
    for info in kb.os.values():
        assert vkey(info.glibc) >= (2, 28), info.name


# -- data file: well-formed and sourced ---------------------------------------------------

def test_every_torch_row_has_a_source_url(raw: dict[str, Any]) -> None:
    for minor, row in raw["torch"].items():
        assert URL.match(str(row.get("source", ""))), minor


def test_every_gaudi_and_os_row_has_a_source_url(raw: dict[str, Any]) -> None:
    for name, row in {**section("gaudi")["releases"], **raw["os"]}.items():
        assert URL.match(str(row.get("source", ""))), name
    for name, url in raw["sources"].items():
        assert URL.match(url), name


def test_every_vendor_section_names_its_vendor_and_source() -> None:
    for name in vendors.BUILTIN:
        data = section(name)
        assert data["vendor"] == name
        assert URL.match(data["source"]), name
        for key, url in data.get("sources", {}).items():
            assert URL.match(url), (name, key)


def test_the_validated_intel_gpus_are_sourced_kernel_pci_ids_no_data_center_max_among_them() -> None:
    """xpu.yaml validated_gpus: PyTorch's XPU guide for the families, the kernel's pciids.h for the ids;
    an id in one family only, and none of Data Center GPU Max (refused, vendors/xpu/decision.py)."""
    from accel_images.vendors.xpu import DATA_CENTER_MAX_IDS, pci_device_id
    table = section("xpu")["validated_gpus"]
    assert URL.match(table["source"]) and URL.match(table["ids_source"])
    ids = [pci_device_id(i) for family in table["families"] for i in family["ids"]]
    assert all(re.fullmatch(r"0x[0-9A-F]{4}", i) for family in table["families"] for i in family["ids"])
    assert all(family["kernel"].startswith("INTEL_") for family in table["families"])
    assert len(ids) == len(set(ids)) and not set(ids) & set(DATA_CENTER_MAX_IDS)


def test_the_amdgpu_driver_rows_are_sourced_ordered_and_each_rocm_release_is_one_run_of_them() -> None:
    """rocm.yaml kernel_driver: AMD's support matrix as the source, each row's package seen (O) or the row
    inferred (I), the rows in their module series' order, and the rows supporting a ROCm release adjacent
    (vendors/rocm/knowledge.py driver_window reads them as one range of module versions)."""
    table = section("rocm")["kernel_driver"]
    assert URL.match(table["source"]) and URL.match(table["matrix_source"])
    rows = table["releases"]
    assert all(row["evidence"] in ("O", "I") and (row["evidence"] == "I" or row["package"]) for row in rows)
    assert [vkey(row["module"]) for row in rows] == sorted(vkey(row["module"]) for row in rows)
    for release in {r for row in rows for r in row["rocm"]}:
        supported = [index for index, row in enumerate(rows) if release in row["rocm"]]
        assert supported == list(range(supported[0], supported[-1] + 1)), release


def test_torch_rows_are_well_formed(raw: dict[str, Any]) -> None:
    allowed = {"released", "versions", "python", "python_experimental", "glibc_min", "companions", "source"}
    dates = []
    for minor, row in raw["torch"].items():
        assert isinstance(minor, str) and VERSION.match(minor), minor
        assert set(row) <= allowed, (minor, set(row) - allowed)
        assert {"released", "versions", "python", "source"} <= set(row), minor
        for key in ("versions", "python", "python_experimental"):
            values = row.get(key, [])
            assert all(isinstance(v, str) and VERSION.match(v) for v in values), (minor, key)
            assert values == sort_versions(values) and len(set(values)) == len(values), (minor, key)
        assert all(v.startswith(minor + ".") for v in row["versions"]), minor
        assert not set(row.get("python_experimental", [])) & set(row["python"]), minor
        dates.append(dt.date.fromisoformat(row["released"]))
    assert list(raw["torch"]) == sort_versions(raw["torch"])
    assert dates == sorted(dates)


@pytest.mark.parametrize("vendor", ["cuda", "rocm", "xpu"])
def test_builds_are_well_formed(raw: dict[str, Any], vendor: str) -> None:
    builds = section(vendor)["builds"]
    for minor, stacks in builds.items():
        assert minor in raw["torch"], (vendor, minor)
        assert all(isinstance(v, str) and VERSION.match(v) for v in stacks), (vendor, minor)
        assert stacks == sort_versions(stacks) and len(set(stacks)) == len(stacks), (vendor, minor)
    assert list(builds) == sort_versions(builds), vendor


def test_cuda_rows_are_well_formed(cuda_raw: dict[str, Any]) -> None:
    for toolkit, driver in cuda_raw["drivers"].items():
        assert re.match(r"^\d+\.\d+\.\d+$", toolkit) and re.match(r"^\d{3}(\.\d+){1,2}$", driver), toolkit
    drivers = [vkey(cuda_raw["drivers"][t]) for t in sort_versions(cuda_raw["drivers"])]
    assert drivers == sorted(drivers), "a newer toolkit never needs an older driver"
    for family, row in cuda_raw["families"].items():
        assert set(row) - {"compat_branches"} == {"mvc_floor", "min_compute", "base_version", "base_os"}, family
        assert all(re.fullmatch(r"\d{3}", branch) for branch in row.get("compat_branches", ())), family
        assert row["base_version"].startswith(family + ".")
        assert all(re.match(r"^ubuntu\d\d\.04$", name) for name in row["base_os"]), family  # nvidia/cuda tags
        assert set(row["base_os"]) & set(cuda_raw["rules"]["os"]), family
    for minor, stacks in cuda_raw["builds"].items():
        for cu in stacks:
            assert cu in cuda_raw["families"], (minor, cu)
        for cu, toolkit in cuda_raw.get("toolkits", {}).get(minor, {}).items():
            assert cu in stacks and toolkit.startswith(cu + ".") and toolkit in cuda_raw["drivers"], (minor, cu)
        for cu, archs in cuda_raw.get("archs", {}).get(minor, {}).items():
            plain = [a.removesuffix("+PTX") for a in archs]
            assert cu in stacks and plain == sort_versions(plain), (minor, cu)
            assert all(a == plain[-1] + "+PTX" for a in archs if a.endswith("+PTX")), "PTX is the newest target"


def test_gaudi_rows_are_well_formed(kb: KnowledgeBase, raw: dict[str, Any]) -> None:
    releases = section("gaudi")["releases"]
    for version, row in releases.items():
        assert re.match(r"^\d+\.\d+\.\d+$", version), version
        kb.release(row["torch"])  # a real torch release
        for os_name, python in row["os"].items():
            assert os_name in raw["os"] and VERSION.match(python), (version, os_name)
    assert list(releases) == sort_versions(releases)


def test_vendor_rules_name_known_oses_and_flavors(raw: dict[str, Any]) -> None:
    assert vendors.names()[:len(vendors.BUILTIN)] == vendors.BUILTIN
    for vendor in vendors.BUILTIN:
        rules = section(vendor)["rules"]
        assert set(rules["os"]) <= set(raw["os"]), vendor
        assert set(rules["flavors"]) <= {"runtime", "devel"}, vendor
    rocm = section("rocm")
    for stack, images in rocm["devel_images"].items():
        assert set(images) - {"evidence", "note", "source", "rocm_path"} <= set(rocm["rules"]["os"]), stack
        assert images["rocm_path"].startswith("/opt/rocm"), stack


def test_shipped_data_parses_into_the_knowledge_base(kb: KnowledgeBase, raw: dict[str, Any]) -> None:
    assert kb.torch_minors() == sort_versions(raw["torch"])
    assert kb.release("2.14.0").minor == "2.14"


# -- query API ---------------------------------------------------------------------------------

def test_version_matching_by_prefix_not_by_text() -> None:
    assert version_matches("6.2", "6.2.4")
    assert not version_matches("6.2", "6.20")
    assert not version_matches("7.1", "7.14")
    assert version_matches("13.0", "13.0")


def test_release_accepts_minor_full_and_local_versions(kb: KnowledgeBase) -> None:
    assert kb.release("2.4").minor == kb.release("2.4.1").minor == kb.release("2.4.1+cu124").minor == "2.4"
    with pytest.raises(IncompatibleError, match="unknown to the knowledge base"):
        kb.release("3.0")
    with pytest.raises(IncompatibleError, match="never released"):
        kb.release("2.4.7")


def test_incompatible_answer_says_why_and_what_works(kb: KnowledgeBase) -> None:
    verdict = kb.check({"torch": "2.1", "rocm": "6.2"})
    assert not verdict.ok
    (reason,) = verdict.reasons
    assert "torch 2.1 has no ROCm 6.2 build" in reason and "ROCm builds: 5.6" in reason
    assert verdict.details["alternatives"]["stacks"] == ["5.6"]


def test_compatible_answer_carries_drivers_and_index(kb: KnowledgeBase) -> None:
    verdict = kb.check({"torch": "2.4.1", "cuda": "12.4", "python": "3.11"})
    assert verdict.ok
    assert verdict.details["wheel_index"] == "cu124"
    assert verdict.details["driver_min"] == "550.54.14"
    assert verdict.details["mvc_floor"] == "525.60.13"
    assert verdict.details["torch"] == "2.4.1"


def test_torch_only_lists_every_stack_with_a_build(kb: KnowledgeBase) -> None:
    builds = kb.check({"torch": "2.4.1"}).details["builds"]
    assert builds == {"cpu": ["cpu"], "cuda": ["11.8", "12.1", "12.4"], "rocm": ["6.1"], "xpu": [], "gaudi": []}
    assert kb.check({"torch": "2.4.0"}).details["builds"]["gaudi"] == ["1.18.0"]


def test_stack_only_lists_torch_versions(kb: KnowledgeBase) -> None:
    assert kb.check({"cuda": "12.4"}).details == {"torch": ["2.4", "2.5", "2.6"]}
    assert kb.check({"gaudi": "1.24"}).details == {"torch": ["2.10.0", "2.11.0"]}
    assert not kb.check({"cuda": "10.2"}).ok


def test_experimental_python_needs_the_flag(kb: KnowledgeBase) -> None:
    query = {"torch": "2.14", "cuda": "13.2", "python": "3.15"}
    verdict = kb.check(query)
    assert not verdict.ok and "experimental" in verdict.reasons[0]
    assert kb.check(query, experimental_python=True).ok


def test_os_rules(kb: KnowledgeBase) -> None:
    assert kb.why_not("cuda", "13.2", "2.14", "3.12", "ubuntu20.04", "runtime")[0].startswith("unknown OS")
    assert "nvidia/cuda has no CUDA 12.4 image for ubuntu24.04" in kb.why_not(
        "cuda", "12.4", "2.6", "3.12", "ubuntu24.04", "devel")[0]
    assert kb.why_not("cuda", "12.4", "2.6", "3.12", "ubuntu24.04", "runtime") == []  # plain Ubuntu base
    assert kb.why_not("cpu", None, "2.14", "3.10", "debian12", "runtime") == [
        "debian12 provides Python 3.11, not 3.10"]
    assert kb.why_not("xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "devel") == []  # on deep-learning-essentials
    assert kb.why_not("xpu", "2026.1", "2.14", "3.12", "ubuntu22.04", "devel")[0].startswith("xpu images are built on")
    assert "no rocm/dev-ubuntu image for ROCm 7.14 on ubuntu22.04" in " ".join(
        kb.why_not("rocm", "7.14", "2.14", "3.11", "ubuntu22.04", "devel"))


def test_cuda_on_debian_is_the_package_index_build_in_the_runtime_flavor_only(kb: KnowledgeBase) -> None:
    """cuda.yaml package_index: Debian images take torch from the package index, which serves one CUDA per
    release (2.14: cu130, 2.15: cu132), and nvidia/cuda has no Debian devel base."""
    assert kb.why_not("cuda", "13.0", "2.14", "3.11", "debian12", "runtime") == []
    assert kb.why_not("cuda", "13.2", "2.15", "3.11", "debian12", "runtime") == []
    assert kb.why_not("cuda", "13.2", "2.14", "3.11", "debian12", "runtime") == [
        "debian12 images take torch from the package index, whose torch 2.14 wheel is the CUDA 13.0 build (cu130),"
        " not CUDA 13.2 (PyTorch's cu132 index: an Ubuntu image)"]
    assert kb.why_not("cuda", "13.0", "2.14", "3.11", "debian12", "devel")[0].startswith(
        "debian12 images are runtime only: nvidia/cuda, whose devel images bring nvcc")
    assert kb.why_not_on("linux/arm64", "cuda", "13.2", "2.15", "3.11", "debian12", "runtime") == []
    assert kb.why_not("cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "runtime") == []  # PyTorch's cu132 index


def test_a_package_index_build_known_on_one_platform_only_is_pruned_on_the_other(kb: KnowledgeBase) -> None:
    """torch 2.12's package-index wheel is known for x86_64 only: no arm64 Debian image is claimed for it."""
    assert kb.why_not("cuda", "13.0", "2.12", "3.11", "debian12", "runtime") == []
    assert kb.why_not_on("linux/amd64", "cuda", "13.0", "2.12", "3.11", "debian12", "runtime") == []
    assert kb.why_not_on("linux/arm64", "cuda", "13.0", "2.12", "3.11", "debian12", "runtime") != []


@pytest.mark.parametrize("terms, expected", [
    (["torch==2.4.1", "cuda==12.4"], {"torch": "2.4.1", "cuda": "12.4"}),
    (["TORCH==2.14", "python==3.12"], {"torch": "2.14", "python": "3.12"}),
    (["torch==2.4.1+cu124"], {"torch": "2.4.1+cu124"}),
    (["xpu==2026.1"], {"xpu": "2026.1"}),
    (["gaudi==1.24.1"], {"gaudi": "1.24.1"}),
    (["rocm==7.14", "cpu"], {"rocm": "7.14", "cpu": ""}),
])
def test_parse_query_accepts(terms: list[str], expected: dict[str, str]) -> None:
    assert parse_query(terms) == expected


@pytest.mark.parametrize("terms, fragment", [
    (["tensorflow==2.14"], "unknown key 'tensorflow'"),
    (["torch=2.14"], "is not KEY==VERSION"),
    (["torch==two"], "is not a version"),
    (["cuda==12.4.x"], "is not a version"),
    (["python==3.11;id"], "is not a version"),
    (["torch==2.14\n"], "is not a version"),
    (["torch==2.4.1+cu124;id"], "is not a version"),
    (["torch==2.4.1+"], "is not a version"),
    (["torch==2.4", "torch==2.5"], "given twice"),
    ([], "nothing to check"),
])
def test_parse_query_rejects(terms: list[str], fragment: str) -> None:
    with pytest.raises(InputError, match=re.escape(fragment)):
        parse_query(terms)


def test_two_stacks_at_once_is_an_input_error(kb: KnowledgeBase) -> None:
    with pytest.raises(InputError, match="one stack at a time"):
        kb.check({"torch": "2.4", "cuda": "12.4", "rocm": "6.1"})


def test_data_file_is_inside_the_package() -> None:
    package = Path(__import__("accel_images").__file__).parent
    assert package / "data" / "kb.yaml" == DATA_FILE
    for name in vendors.BUILTIN:
        assert vendors.get(name).kb_file == package / "data" / "vendors" / f"{name}.yaml"


def test_kb_check_offline_says_the_mirror_hint_once_not_on_every_line() -> None:
    """Seventeen sources out of reach: seventeen lines naming them, and the way out (mirrors) once, in the
    command's error line (accel_images.cli.kb.unreachable_line)."""
    from accel_images.cli.kb import unreachable_line
    from accel_images.kb.check import Report, describe
    from accel_images.kb.sources import SourceUnreachable
    failures = tuple(SourceUnreachable(f"wheel index cu{n}", f"https://download.pytorch.org/whl/cu{n}/torch/",
                                       "unknown host") for n in range(120, 137))
    lines = describe(Report("2026-12-01", (), failures, ()))
    assert len(lines) == 17 and not any("mirror" in line for line in lines), lines
    assert lines[0] == ("unreachable: source wheel index cu120 unreachable: unknown host"
                        " (https://download.pytorch.org/whl/cu120/torch/)")
    assert unreachable_line(failures).count("mirror") == 1
