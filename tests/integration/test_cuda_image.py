"""The CUDA runtime image on Debian 12, built for real: torch 2.15.0+cu132 from the package index, with its
CUDA 13.2 libraries as nvidia-*/cuda-* wheels, on the Debian 12 stand-in, through the same nightly a
team runs. One build a session (tests/conftest.py, `cuda_debian`), shared by every test here:

- the facts are read from the real binaries and agree with the knowledge base, and a wrong row fails;
- the entry-point guard, inside the real image, decides a table of NVIDIA hosts (a fake nvidia-smi where
  GKE puts the driver's, /usr/local/nvidia/bin) from the image's own facts.json;
- the smoke workload ran on the CPU with the CUDA torch: numpy, torch.compile, load_inline, the companions;
- the multi-node stack (RDMA verbs, UCX, Open MPI) is there, the facts name it, and the guard says whether
  a (fake) fabric is usable, refusing one that is not when ACCEL_IMAGES_REQUIRE_RDMA=1;
- the SBOM names every NVIDIA wheel with its hash, the provenance the index that served each;
- the signed publish verifies, and an unchanged second nightly uploads and downloads nothing.

No GPU here: what the image does on one is `make device-check`'s job.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import pytest

from accel_images.builder.builder import Builder, Prepared
from accel_images.builder.engine import Engine
from accel_images.builder.outcome import Outcome
from accel_images.builder.settings import BuildSettings
from accel_images.kb.compat import load_kb
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand, make_variant
from accel_images.state import StateDir
from accel_images.supply import attach
from conftest import TEST_LABEL, TEST_RUN, CudaImage
from test_guard import FAKE_NVIDIA_SMI, GUARD_EXIT

ROOT = Path(__file__).resolve().parents[2]
TAG = "2.15.0-cuda13.2-py3.11-debian12"
PYPI = "https://pypi.org/simple"

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600, check=False)


def in_image(client: docker.DockerClient, cuda: CudaImage, command: list[str], **options: Any) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `command` run through the image's entry point (its guard)."""
    result = Engine(client, client.api.base_url).run(cuda.image_id, command, options={"network_disabled": True,
                                                                                     **options},
                                                     timeout_s=300, labels={TEST_LABEL: TEST_RUN})
    assert not result.timed_out
    return result.exit_code, result.stdout, result.stderr


def facts_of(client: docker.DockerClient, cuda: CudaImage) -> dict[str, Any]:
    code, out, err = in_image(client, cuda, ["cat", "/opt/accel-images/facts.json"],
                              environment={"ACCEL_IMAGES_GUARD": "off"})
    assert code == 0, err
    return json.loads(out)


# ---- the variant and its facts -------------------------------------------------------------------

def test_the_package_index_build_is_what_the_image_holds(cuda_debian: CudaImage,
                                                         docker_client: docker.DockerClient) -> None:
    """torch.version.cuda, cuDNN, NCCL, the toolkit wheel and the SASS list, read from the real binaries,
    are the knowledge base's rows (cuda.yaml toolkits, archs, package_index)."""
    assert cuda_debian.record["status"] == "built" and cuda_debian.record["tag"] == TAG
    facts = facts_of(docker_client, cuda_debian)
    kb = load_kb()
    cuda = kb.section("cuda").facts
    assert facts["torch"] == {"version": "2.15.0+cu132", "public": "2.15.0", "local": "cu132"}
    assert facts["backend"] == "cuda" and facts["platform"] == {"os": "linux", "machine": "x86_64"}
    assert facts["toolkit"]["cuda"] == "13.2" == cuda.package_index_build("linux/amd64", "2.15")
    assert facts["distributions"]["cuda-toolkit"] == cuda.toolkits["2.15"]["13.2"] == "13.2.2"
    assert facts["toolkit"]["cudnn"].startswith("9.") and facts["toolkit"]["nccl"].startswith("2.")
    assert facts["archs"] == ["sm_" + arch.replace(".", "") for arch in cuda.archs["2.15"]["13.2"]]
    assert facts["ptx"] == []
    assert facts["companions"]["torchvision"] == "0.29.2" and facts["companions"]["torchaudio"] == "2.11.1"
    nvidia = {name for name in facts["distributions"] if name.startswith(("nvidia-", "cuda-"))}
    assert {"nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "cuda-toolkit"} <= nvidia


def test_pip_in_the_image_looks_at_the_package_index_it_was_built_from(cuda_debian: CudaImage,
                                                                        docker_client: docker.DockerClient) -> None:
    code, out, err = in_image(docker_client, cuda_debian, ["cat", "/etc/pip.conf"],
                              environment={"ACCEL_IMAGES_GUARD": "off"})
    assert code == 0, err
    assert f"index-url = {PYPI}\n" in out and "extra-index-url" not in out


def test_a_wrong_knowledge_base_row_fails_against_the_real_cuda_facts(cuda_debian: CudaImage,
                                                                        tmp_path: Path) -> None:
    """cuda.yaml's 2.15/13.2 SASS row loses sm_120: the same image's facts now contradict it, and the check
    fails in one line naming that row."""
    kb = load_kb()
    section = kb.section("cuda")
    facts = section.facts
    archs = {**facts.archs, "2.15": {"13.2": facts.archs["2.15"]["13.2"][:-1]}}
    wrong = replace(kb, sections={**kb.sections, "cuda": replace(section, facts=replace(facts, archs=archs))})
    variant = make_variant(wrong, "cuda", "13.2", "2.15", "3.11", "debian12", "runtime")
    engine = Engine.connect()
    try:
        builder = Builder(engine, wrong, expand(load_matrix(ROOT / "matrix.yaml"), wrong),
                          BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke=False))
        prepared = Prepared(variant, cuda_debian.image, tmp_path, {}, "sha256:x", "base@sha256:y")
        checked = builder.check_facts(prepared, Outcome(variant, "built", cuda_debian.image, cuda_debian.image_id))
        right = Builder(engine, kb, expand(load_matrix(ROOT / "matrix.yaml"), kb),
                        BuildSettings(state_dir=StateDir(tmp_path / "right"), smoke=False))
        passed = right.check_facts(replace(prepared, variant=make_variant(kb, "cuda", "13.2", "2.15", "3.11",
                                                                          "debian12", "runtime")),
                                   Outcome(variant, "built", cuda_debian.image, cuda_debian.image_id))
    finally:
        engine.close()
    assert passed.status == "built", passed.error
    assert checked.status == "failed"
    assert checked.error is not None and "\n" not in checked.error
    assert checked.error.startswith("the image's facts contradict the knowledge base:"
                                    ' accel_images/data/vendors/cuda.yaml archs."2.15"."13.2" says'), checked.error


# ---- the smoke workload, on the CPU with the CUDA torch ---------------------------------------------

def test_the_smoke_workload_passed_on_the_cpu_with_the_cuda_torch(cuda_debian: CudaImage) -> None:
    smoke = cuda_debian.record["smoke"]
    assert isinstance(smoke, dict)
    assert smoke["ok"] is True and smoke["ran_on"] == "cpu", smoke
    checks = {check["name"]: check for check in smoke["checks"]}
    assert all(check["ok"] for check in checks.values()), [c for c in checks.values() if not c["ok"]]
    wanted = {"matmul_float32", "mlp_training", "numpy", "torch_compile", "companion_torchvision",
              "companion_torchaudio", "cpp_extension_toolchain", "build", "torch_version", "python_version"}
    assert wanted <= set(checks), sorted(checks)
    assert checks["build"]["detail"] == "torch is built for CUDA 13.2"
    assert checks["accelerator"]["detail"].endswith("ran in CPU mode")


LOAD_INLINE = """
import tempfile, torch
from torch.utils.cpp_extension import load_inline
with tempfile.TemporaryDirectory() as scratch:
    module = load_inline(name="twice", cpp_sources="torch::Tensor twice(torch::Tensor x) { return x * 2; }",
                         functions=["twice"], build_directory=scratch)
    print(torch.cuda.is_available(), module.twice(torch.arange(3.0)).tolist())
"""


def test_load_inline_builds_and_runs_a_cpp_extension_against_the_cuda_torch(
        cuda_debian: CudaImage, docker_client: docker.DockerClient) -> None:
    """The smoke workload checks the toolchain alone (a build of torch/extension.h takes about 30 s on two
    cores); here, once, the real thing: torch.utils.cpp_extension.load_inline, as the image's user."""
    code, out, err = in_image(docker_client, cuda_debian, ["python", "-c", LOAD_INLINE])
    assert code == 0, err[-2000:]
    assert out.strip().splitlines()[-1] == "False [0.0, 2.0, 4.0]", out


# ---- the guard, in the real image, on NVIDIA hosts -------------------------------------------------

def fake_driver(directory: Path, gpus: str | None) -> dict[str, dict[str, str]]:
    """/usr/local/nvidia as GKE's device plugin mounts it (the image's PATH has its bin first), with an
    nvidia-smi answering from `gpus` (a CSV whose first line names the columns); None: no driver at all."""
    directory.mkdir()
    directory.chmod(0o755)
    if gpus is not None:
        (directory / "bin").mkdir(mode=0o755)
        (directory / "gpus.csv").write_text(gpus)
        smi = directory / "bin" / "nvidia-smi"
        smi.write_text(FAKE_NVIDIA_SMI.format(awk="awk", record="/usr/local/nvidia/gpus.csv"))
        smi.chmod(0o755)
        (directory / "gpus.csv").chmod(0o644)
    return {str(directory): {"bind": "/usr/local/nvidia", "mode": "ro"}}


def gpus(driver: str, *cards: tuple[str, str]) -> str:
    return "driver_version, compute_cap, name\n" + "".join(f"{driver}, {cc}, {name}\n" for cc, name in cards)


H100 = ("9.0", "NVIDIA H100 80GB HBM3")
A100 = ("8.0", "NVIDIA A100-SXM4-80GB")
V100 = ("7.0", "Tesla V100-SXM2-32GB")
T4 = ("7.5", "Tesla T4")
B200 = ("10.0", "NVIDIA B200")
RTX_5090 = ("12.0", "NVIDIA GeForce RTX 5090")
RTX_4090 = ("8.9", "NVIDIA GeForce RTX 4090")
GTX_1080 = ("6.1", "NVIDIA GeForce GTX 1080")

CU126 = "2.14.1-cuda12.6-py3.11-ubuntu22.04"   # the nearest image for pre-R580 drivers and pre-Turing GPUs
CU128 = "2.11.0-cuda12.8-py3.12-ubuntu24.04"   # Blackwell on R570

# (id, nvidia-smi's CSV or None, environment, started, fragments of stderr's first line)
HOSTS = [
    ("h100-r580", gpus("580.95.05", H100), {}, True, ()),
    ("a100-r595", gpus("595.71.05", A100), {}, True, ()),
    ("rtx5090-r580", gpus("580.95.05", RTX_5090), {}, True, ()),
    ("h100-r550", gpus("550.54.15", H100), {}, False, ("550.54.15", "580", CU126)),
    ("h100-525.53-inside-the-floors-major", gpus("525.53", H100), {}, False, ("525.53",)),
    ("v100-r580", gpus("580.95.05", V100), {}, False, ("7.0", CU126)),
    ("gtx1080-r580", gpus("580.95.05", GTX_1080), {}, False, ("6.1", CU126)),
    ("b200-r570", gpus("570.86.15", B200), {}, False, ("570.86.15", CU128)),
    ("rtx4090-r575", gpus("575.57.08", RTX_4090), {}, False, ("575.57.08", CU126)),
    ("t4-r535", gpus("535.104.05", T4), {}, False, ("535.104.05", CU126)),
    ("no-gpu", None, {}, True, ("CPU",)),
    ("no-gpu-required", None, {"ACCEL_IMAGES_REQUIRE_ACCELERATOR": "1"}, False, ("--gpus all",)),
]


@pytest.mark.parametrize("host, smi, environment, started, fragments", HOSTS, ids=[h[0] for h in HOSTS])
def test_the_guard_in_the_real_image_decides_each_host(cuda_debian: CudaImage, docker_client: docker.DockerClient,
                                                      tmp_path: Path, host: str, smi: str | None,
                                                      environment: dict[str, str], started: bool,
                                                      fragments: tuple[str, ...]) -> None:
    code, out, err = in_image(docker_client, cuda_debian, ["sh", "-c", "echo started"],
                              volumes=fake_driver(tmp_path / "nvidia", smi), environment=environment)
    first = (err.splitlines() or [""])[0]
    if started:
        assert (code, out) == (0, "started\n"), err
    else:
        assert (code, out) == (GUARD_EXIT, ""), err
        assert first.startswith("accel-images: error: "), err
    for fragment in fragments:
        assert fragment in first, err


def test_the_guard_decides_from_the_images_facts_not_the_rendered_list(cuda_debian: CudaImage,
                                                                        docker_client: docker.DockerClient,
                                                                        tmp_path: Path) -> None:
    """A V100 on R580 against an environment claiming sm_70: refused all the same, since facts.json (the
    binaries' sm_75 ... sm_120) is what the guard reads; with no facts file the claim would admit it."""
    claimed = {"ACCEL_IMAGES_GPU_ARCHS": "7.0,7.5,8.0,8.6,9.0,10.0,12.0"}
    volumes = fake_driver(tmp_path / "nvidia", gpus("580.95.05", V100))
    code, _, err = in_image(docker_client, cuda_debian, ["sh", "-c", "echo started"], volumes=volumes,
                            environment=claimed)
    assert code == GUARD_EXIT and "7.0" in err.splitlines()[0], err
    code, out, err = in_image(docker_client, cuda_debian, ["sh", "-c", "echo started"], volumes=volumes,
                              environment={**claimed, "ACCEL_IMAGES_FACTS": "/nonexistent/facts.json"})
    assert (code, out) == (0, "started\n"), err


# ---- many nodes: the stack, its facts and the guard's line ---------------------------------------------

def test_the_image_carries_the_multi_node_stack_its_facts_name(cuda_debian: CudaImage,
                                                                docker_client: docker.DockerClient) -> None:
    """RDMA verbs (what NCCL opens), UCX and Open MPI from Debian 12, read by the facts from the real files."""
    facts = facts_of(docker_client, cuda_debian)
    network = facts["network"]
    assert network["ibverbs"].startswith("1.") and network["ucx"] and network["mpi"].startswith("Open MPI "), network
    assert network["collective"] == {"name": "nccl", "version": facts["toolkit"]["nccl"]}
    script = ("command -v ibv_devices ibv_devinfo rping mpirun ucx_info > /dev/null && ldconfig -p | grep -c "
              "-e 'libibverbs.so.1 ' -e 'libmlx5.so.1 ' -e 'librdmacm.so.1 ' -e 'libucp.so.0 '")
    code, out, err = in_image(docker_client, cuda_debian, ["sh", "-c", script],
                              environment={"ACCEL_IMAGES_GUARD": "off"})
    assert (code, out.strip()) == (0, "4"), err


def fake_fabric(root: Path, memlock: str) -> dict[str, dict[str, str]]:
    """A host tree for ACCEL_IMAGES_DEV_ROOT with one RDMA device passed (mlx5_0, uverbs0) and a locked-memory limit."""
    (root / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    (root / "dev" / "infiniband").mkdir(parents=True)
    (root / "dev" / "infiniband" / "uverbs0").write_text("")
    (root / "dev" / "infiniband" / "uverbs0").chmod(0o666)
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "limits").write_text(f"Max locked memory         {memlock}  {memlock}  bytes\n")
    for path in (root, *root.rglob("*")):
        path.chmod(path.stat().st_mode | 0o755 if path.is_dir() else path.stat().st_mode | 0o644)
    return {str(root): {"bind": "/fakehost", "mode": "rw"}}


@pytest.mark.parametrize(("memlock", "started", "fragment"), [
    ("unlimited", True, "network: RDMA devices mlx5_0 usable"),
    ("8388608", False, "--ulimit memlock=-1"),
])
def test_the_guard_in_the_real_image_says_whether_rdma_is_usable(cuda_debian: CudaImage,
                                                                  docker_client: docker.DockerClient, tmp_path: Path,
                                                                  memlock: str, started: bool, fragment: str) -> None:
    environment = {"ACCEL_IMAGES_DEV_ROOT": "/fakehost", "ACCEL_IMAGES_REQUIRE_RDMA": "1"}
    code, out, err = in_image(docker_client, cuda_debian, ["sh", "-c", "echo started"],
                              volumes=fake_fabric(tmp_path / "host", memlock), environment=environment)
    assert (code == 0 and out == "started\n") is started, err
    assert code in (0, GUARD_EXIT) and fragment in err, err


def test_the_guard_in_the_real_image_refuses_a_required_fabric_that_is_not_there(
        cuda_debian: CudaImage, docker_client: docker.DockerClient) -> None:
    code, out, err = in_image(docker_client, cuda_debian, ["sh", "-c", "echo started"],
                              environment={"ACCEL_IMAGES_REQUIRE_RDMA": "1"})
    assert (code, out) == (GUARD_EXIT, ""), err
    assert "ACCEL_IMAGES_REQUIRE_RDMA=1: no RDMA device visible" in err, err


# ---- supply chain and the nightly --------------------------------------------------------------------

def registry_json(registry: str, path: str, accept: str) -> Any:
    request = urllib.request.Request(f"http://{registry}{path}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def artifacts(cuda: CudaImage) -> dict[str, bytes]:
    """The SBOM and the signed provenance envelope attached to the published amd64 image, read over the
    registry's HTTP API alone."""
    digest = str(cuda.record["platform_digest"])
    index = json.loads(registry_json(cuda.registry, f"/v2/{cuda.repository}/manifests/{attach.referrers_tag(digest)}",
                                     attach.OCI_INDEX))
    found = {}
    for entry in index["manifests"]:
        manifest = json.loads(registry_json(cuda.registry, f"/v2/{cuda.repository}/manifests/{entry['digest']}",
                                            attach.OCI_MANIFEST))
        found[entry["artifactType"]] = registry_json(
            cuda.registry, f"/v2/{cuda.repository}/blobs/{manifest['layers'][0]['digest']}", "*/*")
    return found


def test_the_sbom_names_every_nvidia_wheel_with_its_hash_and_the_provenance_its_index(
        cuda_debian: CudaImage) -> None:
    found = artifacts(cuda_debian)
    bom = json.loads(found["application/vnd.cyclonedx+json"])
    components = {c["name"]: c for c in bom["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    nvidia = {name: c for name, c in components.items() if name.lower().startswith(("nvidia-", "nvidia_", "cuda-",
                                                                                   "cuda_"))}
    assert len(nvidia) >= 14, sorted(nvidia)
    for name, component in nvidia.items():
        assert component["version"], name
        [sha] = [h["content"] for h in component.get("hashes", ()) if h["alg"] == "SHA-256"]
        assert len(sha) == 64, name
        properties = {p["name"]: p["value"] for p in component.get("properties", ())}
        assert properties["accel-images:index"] == PYPI, name
    envelope = json.loads(found["application/vnd.in-toto+json"])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    wheels = [d for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]
              if d.get("uri", "").startswith("pkg:pypi/")]
    by_name = {d["name"]: d for d in wheels}
    assert any(name.startswith("torch-2.15.0-cp311") for name in by_name)
    for component in nvidia.values():
        sha = component["hashes"][0]["content"]
        [dependency] = [d for d in wheels if d["digest"]["sha256"] == sha]
        assert dependency["annotations"]["index"] == PYPI


def test_the_publish_verifies_and_an_unchanged_nightly_moves_no_byte(cuda_debian: CudaImage) -> None:
    verified = cli("verify", f"{cuda_debian.registry}/{cuda_debian.repository}:{TAG}", "--key",
                   str(cuda_debian.public_key))
    assert verified.returncode == 0 and verified.stdout.startswith("verified: "), verified.stdout + verified.stderr
    again = cli(*cuda_debian.nightly_args())
    assert again.returncode == 0, again.stdout + again.stderr
    [record] = json.loads((cuda_debian.state / "reports" / "nightly-latest" / "report.json").read_text())["variants"]
    assert record["status"] in ("skipped", "kept"), record
    last = again.stderr.strip().splitlines()[-1]
    assert "0 failed" in last and "uploaded 0 B" in last and "fetched" not in last.replace("fetched 0 B", ""), last
