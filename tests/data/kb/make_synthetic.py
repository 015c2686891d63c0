"""Write the SYNTHETIC sources of tests/integration/test_kb.py: PyTorch wheel index pages and registry tag lists.

download.pytorch.org and the registries were not reachable where the package index was recorded
(2026-12-03), so these are made, not recorded. The index pages follow the layout
pytorch/test-infra s3_management/manage_v2.py `to_simple_package_html` emits (commit c22f7faf,
2026-08-12): absolute download-r2 hrefs with %2B, PEP 658/714 metadata attributes,
data-upload-time; hashes are sha256(filename), i.e. fake. Which versions each index lists is the
state the knowledge base's sources describe on 2026-12-03 (see tests/data/kb/README.md). Every
file says SYNTHETIC. Usage: python tests/data/kb/make_synthetic.py
"""
import hashlib
import json
from pathlib import Path

OUT = Path(__file__).parent / "synthetic"
R2 = "https://download-r2.pytorch.org"
PYTHONS = {"2.12": ["cp310", "cp311", "cp312", "cp313", "cp314"], "2.13": ["cp310", "cp311", "cp312", "cp313", "cp314"],
           "2.14": ["cp310", "cp311", "cp312", "cp313", "cp314"], "2.15": ["cp311", "cp312", "cp313", "cp314", "cp315"]}
UPLOAD = {"2.12.0": "2026-05-13", "2.12.1": "2026-06-17", "2.13.0": "2026-07-08", "2.14.0": "2026-09-02",
          "2.14.1": "2026-09-30", "2.15.0": "2026-10-28"}
OLD = ["2.12.0", "2.12.1", "2.13.0"]
INDEXES = {
    "cu126": OLD + ["2.14.0", "2.14.1"],             # 2.15 dropped CUDA 12.6 (pytorch/pytorch#196249)
    "cu130": OLD + ["2.14.0", "2.14.1"],
    "cu132": OLD + ["2.14.0", "2.14.1", "2.15.0"],
    "rocm7.2": OLD + ["2.14.0", "2.14.1"],           # rocm7.2 wheels of 2.14.x seen in public use [O]
    "rocm7.14": ["2.14.0", "2.14.1"],
    "xpu": OLD + ["2.14.0", "2.14.1", "2.15.0"],
    "cpu": OLD + ["2.14.0", "2.14.1", "2.15.0"],
}
TAGS = {  # repository -> tags: the base images matrix.yaml uses, and neighbours
    "library/ubuntu": ["22.04", "24.04", "jammy", "noble", "latest"],
    "library/debian": ["bookworm", "bookworm-slim", "12", "12-slim"],
    "nvidia/cuda": [f"{v}-{f}-{os}" for v in ("12.6.3", "13.0.3", "13.2.1") for f in ("base", "runtime", "devel")
                    for os in ("ubuntu22.04", "ubuntu24.04")],
    "rocm/dev-ubuntu-22.04": ["7.2", "7.2-complete", "7.2.4", "7.2.4-complete"],
    "rocm/dev-ubuntu-24.04": ["7.2", "7.2-complete", "7.2.4", "7.2.4-complete", "7.14.0-full", "7.14.0"],
    "intel/deep-learning-essentials": ["2026.0.0-devel-ubuntu24.04", "2026.1.0-devel-ubuntu24.04", "latest"],
    "gaudi-docker/1.24.0/ubuntu22.04/habanalabs/pytorch-installer-2.10.0": ["1.24.0-1007", "latest"],
    "gaudi-docker/1.24.0/ubuntu24.04/habanalabs/pytorch-installer-2.10.0": ["1.24.0-1007", "latest"],
    "gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0": ["1.24.1-482", "latest"],
    "gaudi-docker/1.24.1/ubuntu24.04/habanalabs/pytorch-installer-2.11.0": ["1.24.1-482", "latest"],
}
PLATFORMS = {"ro": ("manylinux_2_28_x86_64",)}   # ROCm builds are Linux only
NOTE = "SYNTHETIC: made by tests/data/kb/make_synthetic.py, not a recorded response"


def page(index: str) -> str:
    lines = ["<!DOCTYPE html>", "<html>", "  <body>", "    <h1>Links for torch</h1>"]
    names = sorted(f"torch-{v}+{index}-{py}-{py}-{plat}.whl" for v in INDEXES[index]
                   for py in PYTHONS[v[:4]] for plat in PLATFORMS.get(index[:2], ("manylinux_2_28_x86_64", "win_amd64")))
    for name in names:
        fake = hashlib.sha256(name.encode()).hexdigest()
        meta = hashlib.sha256((name + ".metadata").encode()).hexdigest()
        day = UPLOAD[name.split("-")[1].split("+")[0]]
        lines.append(f'    <a href="{R2}/whl/{index}/{name.replace("+", "%2B")}#sha256={fake}"'
                     f' data-dist-info-metadata="sha256={meta}" data-core-metadata="sha256={meta}"'
                     f' data-upload-time="{day}T13:20:00.000000Z">{name}</a><br/>')
    return "\n".join(lines + ["  </body>", "</html>", "<!--TIMESTAMP 1796000000-->", f"<!-- {NOTE} -->", ""])


def main() -> None:
    for index in INDEXES:
        target = OUT / "whl" / index / "torch" / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page(index))
        meta = {"url": f"https://download.pytorch.org/whl/{index}/torch/", "made": "2026-12-03", "synthetic": True,
                "content_type": "text/html", "note": NOTE}
        (target.parent / "index.html.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for repository, tags in TAGS.items():
        target = OUT / "v2" / repository / "tags" / "list.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"name": repository, "tags": tags}) + "\n")
        host = "vault.habana.ai" if repository.startswith("gaudi-docker/") else "registry-1.docker.io"
        meta = {"url": f"https://{host}/v2/{repository}/tags/list", "made": "2026-12-03", "synthetic": True,
                "content_type": "application/json", "note": NOTE}
        (target.parent / "list.json.meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
