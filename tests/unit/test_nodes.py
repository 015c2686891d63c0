"""Training on N nodes (`--nodes`): each runtime's many-node form, read from one Launch and its Cluster.

The host is a node whose description counts 8 of the vendor's devices; the device tree is none (/nonexistent),
so no group of this machine shows. Kubernetes documents are validated offline against the API's OpenAPI schema
(kubernetes-validate, strict: an unknown field fails) and Compose files against the compose-spec schema, as the
one-node forms are (test_runtimes.py). The references each form follows are beside its tests.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner, Result

from accel_images.errors import InputError
from accel_images.host.cluster import Cluster
from accel_images.host.launch import Extras, Launch, launch
from accel_images.host.runtimes import ENGINES, render
from test_runtimes import compose_schema
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "ghcr.io/acme/accel-images/pytorch:T"
K8S_VERSION = "1.30"
VENDORS = ("cpu", "cuda", "rocm", "xpu", "gaudi")
H100X8 = {"vendor": "cuda", "driver_version": "580.126.09", "stack_version": "13.0",
          "gpu_names": ["NVIDIA H100 80GB HBM3"], "gpu_archs": ["9.0"], "device_count": 8}


def nodes(vendor: str, count: int = 2, **changes: Any) -> Launch:
    """`run --print --nodes COUNT -- python train.py --epochs 3` for a node with 8 of the vendor's devices."""
    base = replace(launch(IMAGE, vendor, Path("/nonexistent")), device_count=8, interactive=False,
                   command=("python", "train.py", "--epochs", "3"), cluster=Cluster(count))
    return replace(base, **changes)


def line(text: str) -> list[str]:
    """The command line of a rendered form: its last line, split into words."""
    return text.rstrip("\n").splitlines()[-1].split()


def flag_values(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words) if word == flag]


# ---- Docker and Podman: the line for each node -----------------------------------------------------------
# RDMA in a container: the verbs devices /dev/infiniband/uverbsN ("Userspace communicates with the kernel ... via
#   the /dev/infiniband/uverbsN character devices": https://docs.kernel.org/infiniband/user_verbs.html); IPC_LOCK
#   (the RDMA device plugin's own test Pod: https://github.com/Mellanox/k8s-rdma-shared-dev-plugin
#   example/test-hca-pod.yaml); unlimited memlock, RDMA pinning what it registers (Red Hat, "Configuring InfiniBand
#   and RDMA networks", ch. 5; NVIDIA's NGC PyTorch line has --ulimit memlock=-1); the host network (AMD's RCCL
#   container: "docker run ... --ipc=host --network=host ...",
#   https://rocm.docs.amd.com/projects/rccl/en/latest/install/docker-install.html). The four together in one line
#   for NCCL/RCCL: inferred (no vendor page with all four was found).
# torchrun: "torchrun --nnodes=NUM_NODES --nproc-per-node=TRAINERS_PER_NODE --rdzv-backend=c10d
#   --rdzv-endpoint=HOST_NODE_ADDR YOUR_TRAINING_SCRIPT.py" (https://docs.pytorch.org/docs/stable/elastic/run.html).

DOCKER_CUDA = ("# on each of the 2 nodes, with FIRST_NODE_ADDR replaced by the first node's address (one every node"
               " reaches):\n"
               f"docker run --rm -i --gpus all --device /dev/infiniband --ipc host --network host --ulimit memlock=-1"
               f" --ulimit stack=67108864 --cap-add IPC_LOCK {IMAGE} torchrun --nnodes 2 --nproc-per-node 8"
               " --rdzv-backend c10d --rdzv-endpoint FIRST_NODE_ADDR:29500 train.py --epochs 3\n")
RDMA_FLAGS = [("--device", "/dev/infiniband"), ("--cap-add", "IPC_LOCK"), ("--ulimit", "memlock=-1"),
              ("--network", "host")]


def test_the_docker_line_for_each_of_two_cuda_nodes() -> None:
    rendered = render("docker", nodes("cuda"))
    assert rendered.text == DOCKER_CUDA
    assert rendered.argv is None  # for the nodes, not to run here: `run` prints it
    assert rendered.notes[0] == ("2 nodes meet at FIRST_NODE_ADDR:29500 (torchrun's c10d rendezvous, port 29500);"
                                 " each starts 8 process(es)")


@pytest.mark.parametrize("engine", ["docker", "podman"])
@pytest.mark.parametrize("vendor", ["cuda", "rocm", "xpu", "gaudi"])
def test_each_node_gets_the_four_rdma_flags_once(engine: str, vendor: str) -> None:
    words = line(render(engine, nodes(vendor)).text)
    for flag, value in RDMA_FLAGS:
        assert flag_values(words, flag).count(value) == 1, (flag, value, words)
    assert flag_values(words, "--ulimit").count("memlock=-1") == 1  # CUDA's own memlock is not written twice
    assert flag_values(words, "--network") == ["host"]              # nor Habana's own host network
    assert words[words.index("torchrun"):] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "--rdzv-backend",
                                               "c10d", "--rdzv-endpoint", "FIRST_NODE_ADDR:29500", "train.py",
                                               "--epochs", "3"]


def test_the_cpu_image_meets_over_tcp_one_process_per_node() -> None:
    rendered = render("docker", nodes("cpu"))
    words = line(rendered.text)
    assert "/dev/infiniband" not in words and "IPC_LOCK" not in words
    assert flag_values(words, "--network") == ["host"]
    assert flag_values(words, "--nproc-per-node") == ["1"]
    assert "cpu: no accelerator: gloo over TCP, one process per node, no RDMA devices" in rendered.notes


def test_a_host_that_counts_no_devices_starts_one_process_and_says_why() -> None:
    rendered = render("docker", nodes("rocm", device_count=None))
    assert flag_values(line(rendered.text), "--nproc-per-node") == ["1"]
    assert ("--nproc-per-node 1: the host description counts no rocm devices (pass --host-json with a node's)"
            in rendered.notes)


@pytest.mark.parametrize("command, tail", [((), ["train.py"]), (("python3", "-m", "pkg"), ["--no-python", "python3",
                                                                                             "-m", "pkg"]),
                                           (("bash", "run.sh"), ["--no-python", "bash", "run.sh"])])
def test_torchrun_starts_the_script_or_runs_the_command_as_it_is(command: tuple[str, ...], tail: list[str]) -> None:
    """torchrun starts a script with Python itself; `--no-python`: "Skip prepending the training script with
    'python' - just execute it directly" (torch.distributed.run)."""
    words = line(render("docker", nodes("cuda", command=command)).text)
    assert words[words.index("FIRST_NODE_ADDR:29500") + 1:] == tail


# ---- Slurm: srun across N nodes (Enroot with Pyxis, Apptainer) ---------------------------------------------
# srun(1) (https://slurm.schedmd.com/srun.html): --nodes, --ntasks-per-node, "--gpus-per-node=[type:]<number>
#   Specify the number of GPUs required for the job on each node". scontrol(1) "show hostnames": one host name per
#   line of a host list. Pyxis: https://github.com/NVIDIA/pyxis (--container-image).

def recommend(tmp_path: Path, *args: str, host: dict[str, object] = H100X8) -> Result:
    from accel_images.cli import fanout
    path = tmp_path / "host.json"
    path.write_text(json.dumps(host))
    return CliRunner().invoke(fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--host-json",
                                                         str(path), "--registry", "ghcr.io/acme", "--from-matrix",
                                                         *args])


def test_srun_asks_for_the_nodes_and_every_gpu_the_host_description_counts(tmp_path: Path) -> None:
    result = recommend(tmp_path, "--engine", "enroot", "--nodes", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2] == 'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"'
    srun = lines[-1].split()
    assert srun[:4] == ["srun", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8"]
    assert not any(word.startswith("--gres") for word in srun)  # never a fixed --gres=gpu:1
    assert srun[srun.index("torchrun"):] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "--rdzv-backend",
                                             "c10d", "--rdzv-endpoint", '"$MASTER_ADDR:29500"', "--rdzv-id",
                                             '"$SLURM_JOB_ID"', "train.py"]


def test_one_node_under_slurm_asks_for_the_eight_gpus_the_node_has(tmp_path: Path) -> None:
    """Before: `srun --gres=gpu:1` on an 8-GPU node."""
    result = recommend(tmp_path, "--engine", "enroot")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("srun --pty --gres=gpu:8 ")


def test_apptainer_runs_under_srun_on_each_node() -> None:
    rendered = render("apptainer", nodes("cuda", workspace=Path("/home/me/p")))
    assert rendered.text.splitlines()[-1] == (
        "srun --nodes=2 --ntasks-per-node=1 --gpus-per-node=8 apptainer run --nv --bind /home/me/p:/workspace --pwd"
        f" /workspace docker://{IMAGE} torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint"
        ' "$MASTER_ADDR:29500" --rdzv-id "$SLURM_JOB_ID" train.py --epochs 3')
    assert rendered.text.splitlines()[0].startswith("# inside an allocation of 2 nodes")


def test_a_vendor_without_a_known_gres_asks_for_none_and_says_so() -> None:
    rendered = render("enroot", nodes("gaudi"))
    assert "--nodes=2 --ntasks-per-node=1 '--container-image" in rendered.text
    assert "gaudi: no Slurm GRES is known for its devices; ask the site which to request" in rendered.notes


# ---- Kubernetes: an indexed Job with a headless Service, or a PyTorchJob -----------------------------------
# "Job with Pod-to-Pod Communication" (https://kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication/):
#   completionMode Indexed, a headless Service (clusterIP: None) selecting `job-name`, the Pods' `subdomain` the
#   Service's name, so pod i is `$(job-name)-$(index).$(subdomain)`.
# The RDMA plugin's resource and IPC_LOCK: Mellanox/k8s-rdma-shared-dev-plugin example/test-hca-pod.yaml
#   (`rdma/hca_shared_devices_a: 1`, `capabilities: add: ["IPC_LOCK"]`).
# PyTorchJob (kubeflow.org/v1): container `pytorch`, port `pytorchjob-port` (kubeflow/training-operator
#   pkg/apis/kubeflow.org/v1/pytorch_types.go); https://www.kubeflow.org/docs/components/trainer/legacy-v1/

def documents(text: str) -> list[Any]:
    assert text.startswith("# Pod Security Standard: ")
    return [document for document in yaml.safe_load_all(text) if document is not None]


def test_kubernetes_runs_an_indexed_job_whose_pods_find_pod_0_through_a_headless_service() -> None:
    service, job = documents(render("kubernetes", nodes("cuda")).text)
    for document in (service, job):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    assert service["kind"] == "Service" and service["spec"] == {"clusterIP": "None",
                                                                "selector": {"job-name": "accel-images-train"}}
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "accel-images-train" and "hostNetwork" not in pod
    container = pod["containers"][0]
    assert container["env"][:2] == [{"name": "MASTER_ADDR", "value": "accel-images-train-0.accel-images-train"},
                                    {"name": "MASTER_PORT", "value": "29500"}]
    command = container["command"]
    assert command[command.index("torchrun"):] == ["torchrun", "--nnodes", "2", "--nproc-per-node", "8",
                                                   "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                                   "$(MASTER_ADDR):$(MASTER_PORT)", "train.py", "--epochs", "3"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}


def test_the_rdma_resource_is_the_one_named_and_its_pods_may_lock_memory() -> None:
    rendered = render("kubernetes", nodes("rocm", cluster=Cluster(3, rdma_resource="rdma/hca_shared_devices_a")))
    _, job = documents(rendered.text)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"amd.com/gpu": 8, "rdma/hca_shared_devices_a": 1}
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    assert job["spec"]["completions"] == 3
    assert rendered.text.startswith("# Pod Security Standard: privileged (hostIPC: rocm asks for the host's IPC"
                                    " namespace; seccomp Unconfined: rocm asks for it; capabilities SYS_PTRACE: rocm"
                                    " adds them; capability IPC_LOCK: RDMA pins the memory it registers"
                                    " (--rdma-resource))\n")
    assert not any("NCCL uses TCP" in note for note in rendered.notes)


def test_without_an_rdma_resource_the_notes_say_nccl_uses_tcp() -> None:
    rendered = render("kubernetes", nodes("cuda"))
    container = documents(rendered.text)[1]["spec"]["template"]["spec"]["containers"][0]
    assert "add" not in container["securityContext"]["capabilities"]
    assert any(note.startswith("no RDMA resource asked for: NCCL uses TCP") for note in rendered.notes)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("kind", ["job", "pytorchjob"])
def test_every_many_node_manifest_passes_the_schema(vendor: str, kind: str) -> None:
    extras = Extras(environment=(("A", "$HOME"),), name="train-1")
    for cluster in (Cluster(2, k8s_kind=kind), Cluster(4, rdma_resource="rdma/ib", k8s_kind=kind)):
        for document in documents(render("kubernetes", nodes(vendor, cluster=cluster, extras=extras)).text):
            validate_kubernetes(document)


# What a PyTorchJob holds, from the training operator's CRD (manifests/base/crds/kubeflow.org_pytorchjobs.yaml):
# the fields used here, anything else refused; each replica's template is a Pod template, validated by the API's own.
PYTORCHJOB_SCHEMA = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v1"}, "kind": {"const": "PyTorchJob"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {"type": "object", "required": ["pytorchReplicaSpecs"], "additionalProperties": False,
                 "properties": {
                     "pytorchReplicaSpecs": {
                         "type": "object", "additionalProperties": False, "required": ["Master"],
                         "properties": {name: {"type": "object", "additionalProperties": False,
                                               "required": ["replicas", "template"],
                                               "properties": {"replicas": {"type": "integer", "minimum": 0},
                                                              "restartPolicy": {"enum": ["Always", "OnFailure",
                                                                                         "Never", "ExitCode"]},
                                                              "template": {"type": "object"}}}
                                        for name in ("Master", "Worker")}},
                     "nprocPerNode": {"type": "string"}, "runPolicy": {"type": "object"},
                     "elasticPolicy": {"type": "object"}}}}}


def validate_kubernetes(document: Any) -> None:
    if document["kind"] != "PyTorchJob":
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
        return
    jsonschema.validate(document, PYTORCHJOB_SCHEMA)
    for replica in document["spec"]["pytorchReplicaSpecs"].values():
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                      "template": replica["template"]}, K8S_VERSION, strict=True)


def test_a_pytorchjob_has_one_master_and_n_minus_one_workers_named_as_the_operator_reads() -> None:
    [job] = documents(render("kubernetes", nodes("cuda", cluster=Cluster(4, k8s_kind="pytorchjob"))).text)
    validate_kubernetes(job)
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 3)
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["ports"][0] == {"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"}
    assert "$(MASTER_ADDR):$(MASTER_PORT)" in container["command"] and "env" not in container  # the operator's


def test_the_many_node_schema_checks_can_fail() -> None:
    job = documents(render("kubernetes", nodes("cuda")).text)[1]
    job["spec"]["bogus"] = 1
    with pytest.raises(kubernetes_validate.ValidationError, match="bogus"):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    [pytorchjob] = documents(render("kubernetes", nodes("cuda", cluster=Cluster(2, k8s_kind="pytorchjob"))).text)
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["bogus"] = 1
    with pytest.raises(kubernetes_validate.ValidationError, match="bogus"):
        validate_kubernetes(pytorchjob)
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Chief"] = {}
    with pytest.raises(jsonschema.ValidationError, match="Chief"):
        validate_kubernetes(pytorchjob)


@pytest.mark.parametrize("name", ["Train", "1train", "t" * 62, "a.b"])
def test_a_name_that_cannot_name_the_pods_and_their_service_is_one_line(name: str) -> None:
    with pytest.raises(InputError) as raised:
        render("kubernetes", nodes("cuda", extras=Extras(name=name)))
    assert raised.value.one_line().startswith(f"--name: {name!r} cannot name 2 Pods and their Service")
    assert "\n" not in raised.value.one_line()


# ---- Compose: N services rehearsing N nodes on this host ---------------------------------------------------
# Compose "Networking in Compose" (https://docs.docker.com/compose/how-tos/networking/): a service is reachable on
# the network by its name; compose-spec 05-services: network_mode and networks exclude each other.

def test_compose_rehearses_two_nodes_as_two_services_on_one_network() -> None:
    rendered = render("compose", nodes("cuda", extras=Extras(ports=())))
    document = yaml.safe_load(rendered.text)
    assert [error.message for error in compose_schema().iter_errors(document)] == []
    assert list(document["services"]) == ["node0", "node1"] and document["networks"] == {"nodes": {}}
    for service in document["services"].values():
        assert service["networks"] == ["nodes"] and "network_mode" not in service
        assert service["image"] == IMAGE
        assert service["command"][service["command"].index("--rdzv-endpoint") + 1] == "node0:29500"
    assert any(note.startswith("a rehearsal of 2 nodes on this host") for note in rendered.notes)


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_rehearsal_passes_the_compose_spec_schema(vendor: str) -> None:
    from accel_images.host.launch import Port
    extras = Extras(ports=(Port.parse("8888:8888"),), name="dev")
    document = yaml.safe_load(render("compose", nodes(vendor, count=3, extras=extras)).text)
    assert [error.message for error in compose_schema().iter_errors(document)] == []
    assert [("ports" in service) for service in document["services"].values()] == [True, False, False]


# ---- the commands ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_one_node_is_todays_output_unchanged(engine: str, tmp_path: Path) -> None:
    plain = recommend(tmp_path, "--engine", engine)
    one = recommend(tmp_path, "--engine", engine, "--nodes", "1")
    assert plain.exit_code == one.exit_code == 0
    assert one.stdout == plain.stdout
    assert "torchrun" not in one.stdout


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_a_bad_node_count_is_one_line_naming_the_option(value: str, tmp_path: Path) -> None:
    from accel_images.cli import session as cli_session
    for result in (recommend(tmp_path, "--nodes", value),
                   CliRunner().invoke(cli_session.run_command, ["img:t", "--vendor", "cpu", "--print",
                                                                "--nodes", value])):
        assert result.exit_code == 2, result.output
        assert result.stderr == (f"accel-images: error: --nodes: {value!r} is not a number of nodes (a whole"
                                 " number, 1 or more)\n")


def test_a_bad_rdma_resource_is_one_line_naming_the_option(tmp_path: Path) -> None:
    result = recommend(tmp_path, "--nodes", "2", "--engine", "kubernetes", "--rdma-resource", "hca shared")
    assert result.exit_code == 2
    assert result.stderr.startswith("accel-images: error: --rdma-resource: 'hca shared' is not")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("option", [["--rdma-resource", "rdma/ib"], ["--k8s-kind", "pytorchjob"]])
def test_a_many_node_option_on_one_node_is_said_not_ignored(option: list[str], tmp_path: Path) -> None:
    result = recommend(tmp_path, "--engine", "kubernetes", *option)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"accel-images: error: {option[0]}: applies to several nodes only")
    assert len(result.stderr.splitlines()) == 1


def test_run_prints_the_many_node_form_instead_of_starting_it(tmp_path: Path) -> None:
    from accel_images.cli import session as cli_session
    host = tmp_path / "host.json"
    host.write_text(json.dumps(H100X8))
    result = CliRunner().invoke(cli_session.run_command, ["img:2.14.0-cuda13.0-py3.12-ubuntu24.04", "--nodes", "2",
                                                          "--host-json", str(host), "--workspace", str(tmp_path),
                                                          "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# on each of the 2 nodes")
    assert "--nproc-per-node 8 " in result.stdout and "--device /dev/infiniband" in result.stdout


def test_every_engine_renders_every_vendor_on_many_nodes() -> None:
    for engine in ENGINES:
        for vendor in VENDORS:
            rendered = render(engine, nodes(vendor, count=3))
            assert rendered.text.endswith("\n") and rendered.argv is None
