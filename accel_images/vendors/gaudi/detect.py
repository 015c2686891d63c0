"""Reading an Intel Gaudi host: hl-smi's device rows and driver version, and each device's generation
by its model number.

`probe` is the one entry (host.py's `GaudiHost.probe`). References: the model-number table's sources
(GENERATIONS, excerpts in tests/data/host/gaudi-model-names-sources.txt).
"""

from __future__ import annotations

import re
from pathlib import Path

from accel_images.model.hostinfo import Gpu, HostInfo, Runner, host_from, leading_version, quote, summary

GENERATIONS = {"205": "gaudi", "225": "gaudi2",
               "325": "gaudi3", "328": "gaudi3", "335": "gaudi3", "338": "gaudi3", "388": "gaudi3"}
"""hl-smi model number -> Gaudi generation, matched on the number so suffixed names follow (HL-225B, HL-325L).
Sources (excerpts in tests/data/host/gaudi-model-names-sources.txt): dstack's hl-smi name table
(src/dstack/_internal/utils/gpu.py: HL-205 Gaudi, HL-225 Gaudi2, HL-325 and HL-338 Gaudi3); Intel's Gaudi 3
whitepaper as The Register read it (2024-04-12: HL-325L and HL-335 OAM, HL-338 PCIe, HL-328 and HL-388 for
China); IBM Cloud's "Gaudi 3" machine listing 8 x HL-325L; Ray's Gaudi 2 tutorial listing 8 x HL-225."""
GAUDI2 = "gaudi2"
# The model number of an hl-smi name: "HL-325L" -> "325".
_MODEL_NUMBER = re.compile(r"HL-(\d{3})", re.IGNORECASE)


def generation(model: str | None) -> str | None:
    """'HL-225' -> 'gaudi2', 'HL-325L' -> 'gaudi3', 'HL-205' -> 'gaudi'; an unknown model -> None."""
    number = _MODEL_NUMBER.match((model or "").strip())
    return GENERATIONS.get(number.group(1)) if number else None


def probe(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    """hl-smi's table and its name/driver query: the devices, their generations and the driver version."""
    table = run(["hl-smi"])
    query = run(["hl-smi", "-Q", "name,driver_version", "-f", "csv,noheader"])
    if table is None and query is None:
        notes.append("gaudi: hl-smi missing, failing or timed out")
        return None
    query_driver, query_gpus = parse_hl_smi_query(query or "")
    table_driver, table_gpus = parse_hl_smi_table(table or "")
    driver, gpus = table_driver or query_driver, query_gpus or table_gpus
    if not (driver and gpus):
        notes.append("gaudi: hl-smi answered without a device row and driver version:"
                     f" {quote(table or query or '')}")
        return None
    version = leading_version(driver)
    gpus = [Gpu(gpu.name, generation(gpu.name)) for gpu in gpus]
    unknown = sorted({gpu.name or "" for gpu in gpus if gpu.arch is None})
    notes.append(f"gaudi: hl-smi lists {summary(gpus)}, driver {driver} (Gaudi software {version})"
                 + (f", generation {', '.join(dict.fromkeys(g.arch for g in gpus if g.arch))}"
                    if len(unknown) < len(gpus) else "")
                 + (f"; generation unknown for {', '.join(unknown)}" if unknown else ""))
    return host_from("gaudi", gpus, driver_version=driver, stack_version=version)


_HL_DRIVER = re.compile(r"^\|\s*Driver Version:\s*(\S+)", re.MULTILINE)  # not "Nic Driver Version"
_HL_ROW = re.compile(r"^\|\s+\d+\s+(HL-\S+)\s", re.MULTILINE)
_HL_DRIVER_VALUE = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")


def parse_hl_smi_query(text: str) -> tuple[str | None, list[Gpu]]:
    """``hl-smi -Q name,driver_version -f csv,noheader`` rows: 'HL-225, 1.15.0-c43dc7b'."""
    driver, gpus = None, []
    for line in text.splitlines():
        name, _, value = (part.strip() for part in line.partition(","))
        if name and _HL_DRIVER_VALUE.fullmatch(value):
            driver = driver or value
            gpus.append(Gpu(name))
    return driver, gpus


def parse_hl_smi_table(text: str) -> tuple[str | None, list[Gpu]]:
    driver = _HL_DRIVER.search(text)
    value = driver.group(1) if driver and _HL_DRIVER_VALUE.fullmatch(driver.group(1)) else None
    return value, [Gpu(name) for name in _HL_ROW.findall(text)]
