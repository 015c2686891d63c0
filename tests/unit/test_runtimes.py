"""How an image runs under each runtime (accel_images/host/runtimes/), for each vendor, exactly.

Every expected text is the renderer's whole output for one vendor, with the document line it follows
beside it. The device tree is test_session's fake /dev, whose device files belong to groups 44 and 109.
Kubernetes manifests are validated offline against the API's OpenAPI schema (kubernetes-validate ships
the schemas of Kubernetes 1.25 to 1.37) and Compose files against the compose-spec schema
(check-jsonschema ships it), strictly: an unknown field fails.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from accel_images.errors import InputError
from accel_images.host.launch import Extras, Launch, Mount, Port, git_identity, launch, parse_env
from accel_images.host.runtimes import ENGINES, render
from accel_images.host.runtimes.enroot import enroot_uri
from test_session import dev_root, fake_dev, gids  # noqa: F401  (the fixture and its helpers)
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "reg.example/ai/pytorch:T"
DIGEST = "sha256:" + "ab" * 32
VENDORS = ("cpu", "cuda", "rocm", "xpu", "gaudi")
K8S_VERSION = "1.30"


def session(vendor: str, dev_root: Path, **changes: object) -> Launch:
    """`accel-images run --print -- python -V` as user 1234:5678 in /src, standard input not a terminal."""
    return replace(launch(IMAGE, vendor, dev_root), user=(1234, 5678), workspace=Path("/src"),
                   command=("python", "-V"), interactive=False, **changes)  # type: ignore[arg-type]


def chosen(vendor: str, dev_root: Path) -> Launch:
    """What `recommend --engine ... --registry REG` renders for a host with two of the vendor's devices: the
    vendor's container as `run --print` has it (its session settings too: one Launch), no user or workspace,
    the image by digest."""
    return replace(launch(IMAGE, vendor, dev_root), digest=DIGEST, device_count=2)


# ---- Podman ---------------------------------------------------------------------------------------
# NVIDIA CDI support: "podman run --rm --device nvidia.com/gpu=all --security-opt=label=disable ubuntu nvidia-smi -L"
#   https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
# ROCm: "docker run --device /dev/kfd --device /dev/dri --security-opt seccomp=unconfined <image>"; podman-run(1)
#   takes the same --device syntax. https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html
# Intel oneAPI: "docker run --device=/dev/dri -it "$image"" (the same flag under Podman).
# Habana: Docker's runtime "habana" is "/usr/bin/habana-container-runtime" (Docker_Installation.html); the
#   Podman form by its path is inferred, and the note says so. A session's `--net=host` (Pull_Prebuilt_Containers)
#   is podman-run(1)'s --network host.

PODMAN = {
    "cpu": "podman run --rm -i --ipc host --user 1234:5678 --group-add 100 --mount type=bind,source=/src,target=/workspace -w /workspace {image} python -V",
    "cuda": "podman run --rm -i --device nvidia.com/gpu=all --security-opt label=disable --ipc host"
            " --ulimit memlock=-1 --ulimit stack=67108864 --user 1234:5678 --group-add 100 --mount type=bind,source=/src,target=/workspace -w /workspace"
            " {image} python -V",
    "rocm": "podman run --rm -i --device /dev/kfd --device /dev/dri --security-opt label=disable --group-add {g0}"
            " --group-add {g1} --cap-add SYS_PTRACE --ipc host --security-opt seccomp=unconfined --user 1234:5678 --group-add 100"
            " --mount type=bind,source=/src,target=/workspace -w /workspace {image} python -V",
    "xpu": "podman run --rm -i --device /dev/dri --security-opt label=disable --group-add {g0} --group-add {g1}"
           " --ipc host --user 1234:5678 --group-add 100 --mount type=bind,source=/src,target=/workspace -w /workspace {image} python -V",
    "gaudi": "podman run --rm -i --runtime /usr/bin/habana-container-runtime --network host"
             " -e HABANA_VISIBLE_DEVICES=all -e OMPI_MCA_btl_vader_single_copy_mechanism=none --cap-add SYS_NICE"
             " --ipc host --ulimit memlock=-1 --user 1234:5678 --group-add 100 --mount type=bind,source=/src,target=/workspace -w /workspace {image} python -V",
}


def expected(template: str, dev_root: Path, image: str = IMAGE) -> str:
    found = gids(dev_root)
    return template.format(image=image, g0=found[0], g1=found[1]) + "\n"


@pytest.mark.parametrize("vendor", VENDORS)
def test_podman_line_for_each_vendor(vendor: str, dev_root: Path) -> None:
    rendered = render("podman", session(vendor, dev_root))
    assert rendered.text == expected(PODMAN[vendor], dev_root)
    assert rendered.argv is not None and list(rendered.argv) == rendered.text.split()  # no quoting needed here
    gaudi_note = ("--runtime /usr/bin/habana-container-runtime: Docker's `--runtime habana` given to Podman"
                  " by its path (unverified)")
    assert rendered.notes == ((gaudi_note,) if vendor == "gaudi" else ())


def test_rootless_podman_keeps_the_users_groups_and_ids(dev_root: Path) -> None:
    """AMD Container Toolkit, Podman: "When running in rootless mode ... use the --group-add keep-groups flag";
    podman-run(1) --userns: "keep-id: creates a user namespace where the current user's UID:GID are mapped to
    the same values in the container"; rootless limits cannot be raised (podman-run(1) --ulimit)."""
    rocm = render("podman", session("rocm", dev_root, rootless=True))
    assert "--group-add keep-groups --cap-add SYS_PTRACE" in rocm.text and " --group-add 44 " not in rocm.text
    assert "--userns keep-id --user 1234:5678 --group-add 100 --mount type=bind,source=/src,target=/workspace" in rocm.text
    assert rocm.notes == ("--group-add keep-groups needs the crun runtime: with runc the device groups are dropped",)
    cuda = render("podman", session("cuda", dev_root, rootless=True))
    assert "--ulimit" not in cuda.text
    assert cuda.notes == ("ulimits memlock=-1 stack=67108864 left out: rootless Podman cannot raise limits above"
                          " your own",)


# ---- Apptainer ------------------------------------------------------------------------------------
# Apptainer user guide, gpu.rst: --nv "Ensure that the /dev/nvidiaX device entries are available ... Locate and
#   bind the basic CUDA libraries from the host"; --rocm "Ensure that the /dev/dri/ device entries are available
#   ... Locate and bind the basic ROCm libraries"; "all of /dev on the host is normally made available inside the
#   container, so nothing special needs to be done" (Intel GPU, Gaudi). https://apptainer.org/docs/user/main/gpu.html
# bind_paths_and_mounts: "--bind src[:dest[:opts]]"; docker_and_oci: `run` executes the ENTRYPOINT (the guard).

APPTAINER = {
    "cpu": "apptainer run --bind /src:/workspace --pwd /workspace docker://{image} python -V",
    "cuda": "apptainer run --nv --bind /src:/workspace --pwd /workspace docker://{image} python -V",
    "rocm": "apptainer run --rocm --bind /src:/workspace --pwd /workspace docker://{image} python -V",
    "xpu": "apptainer run --bind /src:/workspace --pwd /workspace docker://{image} python -V",
    "gaudi": "apptainer run --env HABANA_VISIBLE_DEVICES=all --env OMPI_MCA_btl_vader_single_copy_mechanism=none"
             " --bind /src:/workspace --pwd /workspace docker://{image} python -V",
}
APPTAINER_NOTES = {
    "cpu": (), "xpu": (),
    "cuda": ("ulimits memlock=-1 stack=67108864 not set: your own apply",),
    "rocm": ("SYS_PTRACE not added: Apptainer runs with your own privileges",),
    "gaudi": ("no `--runtime habana` under Apptainer: the host's device nodes are shown as they are",
              "SYS_NICE not added: Apptainer runs with your own privileges",
              "ulimits memlock=-1 not set: your own apply"),
}


@pytest.mark.parametrize("vendor", VENDORS)
def test_apptainer_line_for_each_vendor(vendor: str, dev_root: Path) -> None:
    rendered = render("apptainer", session(vendor, dev_root))
    assert rendered.text == expected(APPTAINER[vendor], dev_root)
    assert rendered.notes == APPTAINER_NOTES[vendor] and rendered.argv is None  # printed, never run here


def test_apptainer_pulls_by_digest_where_the_catalogue_gave_one(dev_root: Path) -> None:
    rendered = render("apptainer", chosen("cuda", dev_root))
    assert rendered.text == f"apptainer run --nv docker://reg.example/ai/pytorch@{DIGEST}\n"


# ---- Enroot with Pyxis ----------------------------------------------------------------------------
# Pyxis `srun --help`: "--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "--container-mounts=SRC:DST[:FLAGS]
#   [,SRC:DST...]", "--container-workdir=PATH"; "--container-entrypoint ... execute the entrypoint from the
#   container image" (off by default), hence the guard by its path. https://github.com/NVIDIA/pyxis
# Slurm gres.html: GRES "gpu" with AutoDetect=nvml / rsmi / oneapi. Pyxis tests/env.bats: host variables reach
#   the container (`NVIDIA_VISIBLE_DEVICES=0 srun ...`), hence `env NAME=VALUE srun`.

ENROOT = {
    "cpu": "srun '--container-image=reg.example#ai/pytorch:T' --container-mounts=/src:/workspace"
           " --container-workdir=/workspace /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V",
    "cuda": "srun --gres=gpu:4 '--container-image=reg.example#ai/pytorch:T' --container-mounts=/src:/workspace"
            " --container-workdir=/workspace /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V",
    "rocm": "srun --gres=gpu:4 '--container-image=reg.example#ai/pytorch:T' --container-mounts=/src:/workspace"
            " --container-workdir=/workspace /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V",
    "xpu": "srun --gres=gpu:4 '--container-image=reg.example#ai/pytorch:T' --container-mounts=/src:/workspace"
           " --container-workdir=/workspace /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V",
    "gaudi": "env HABANA_VISIBLE_DEVICES=all OMPI_MCA_btl_vader_single_copy_mechanism=none srun"
             " '--container-image=reg.example#ai/pytorch:T' --container-mounts=/src:/workspace"
             " --container-workdir=/workspace /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V",
}
ENROOT_NOTES = {
    "cpu": (),
    "cuda": ("ulimits memlock=-1 stack=67108864 not set: the job's apply",),
    "rocm": ("where the site sets ENROOT_RESTRICT_DEV, add /dev/kfd,/dev/dri to --container-mounts (unverified)",
             "SYS_PTRACE not added: Enroot containers run unprivileged"),
    "xpu": ("where the site sets ENROOT_RESTRICT_DEV, add /dev/dri to --container-mounts (unverified)",),
    "gaudi": ("gaudi: no Slurm GRES is known for its devices; ask the site which to request",
              "SYS_NICE not added: Enroot containers run unprivileged",
              "ulimits memlock=-1 not set: the job's apply"),
}


@pytest.mark.parametrize("vendor", VENDORS)
def test_enroot_line_for_each_vendor(vendor: str, dev_root: Path) -> None:
    rendered = render("enroot", session(vendor, dev_root, device_count=4))
    assert rendered.text == expected(ENROOT[vendor], dev_root)
    assert rendered.notes == ENROOT_NOTES[vendor] and rendered.argv is None


def test_enroot_without_a_command_opens_a_shell_through_the_guard(dev_root: Path) -> None:
    rendered = render("enroot", chosen("cpu", dev_root))
    assert rendered.text == "srun --pty '--container-image=reg.example#ai/pytorch:T' /usr/bin/tini -s -g -- /opt/accel-images/guard.sh bash\n"


@pytest.mark.parametrize("image, uri", [
    ("ghcr.io/acme/accel-images/pytorch:t", "ghcr.io#acme/accel-images/pytorch:t"),
    ("127.0.0.1:5000/a/b:t", "127.0.0.1:5000#a/b:t"),
    ("localhost/a:t", "localhost#a:t"),
    ("accel-images/pytorch:t", "accel-images/pytorch:t"),   # Docker Hub: no registry part
    ("ubuntu:24.04", "ubuntu:24.04"),
])
def test_an_enroot_uri_puts_a_hash_after_the_registry(image: str, uri: str) -> None:
    """Enroot import.md: `docker://[<user>@][<registry>#]<image>[:<tag>]`, the form every release parses."""
    assert enroot_uri(image) == uri


# ---- Kubernetes -----------------------------------------------------------------------------------
# Kubernetes, Schedule GPUs: "GPUs are only supposed to be specified in the limits section" with nvidia.com/gpu or
#   amd.com/gpu (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/); Intel's GPU plugin README:
#   gpu.intel.com/i915 | gpu.intel.com/xe; Habana's job example: "habana.ai/gaudi: 1", "hostIPC: true",
#   capabilities add "SYS_NICE", no HABANA_VISIBLE_DEVICES (docs.habana.ai Orchestration/Gaudi_Kubernetes).
# The API's emptyDir: "medium ... Must be an empty string (default) or Memory"; Images: "Digests are hashes of
#   the image's content, and are immutable".

RESTRICTED = "# Pod Security Standard: restricted\n"
POD_HEAD = """apiVersion: v1
kind: Pod
metadata:
  generateName: accel-images-
spec:
  restartPolicy: Never
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    runAsGroup: 1000
    fsGroup: 1000
"""
GROUPS = """    supplementalGroups:
    - {g0}
    - {g1}
"""
CONTAINER = """  containers:
  - name: main
    image: reg.example/ai/pytorch@sha256:abababababababababababababababababababababababababababababababab
    command:
    - /usr/bin/tini
    - -s
    - -g
    - --
    - /opt/accel-images/guard.sh
    - sleep
    - infinity
"""


def security(seccomp: str = "RuntimeDefault", add: str = "") -> str:
    """The container's securityContext: the restricted level's settings, and what the vendor adds."""
    added = f"        add:\n{add}" if add else ""
    return f"""    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop:
        - ALL
{added}      seccompProfile:
        type: {seccomp}
"""


SHM_MOUNT = """    volumeMounts:
    - name: dshm
      mountPath: /dev/shm
  volumes:
  - name: dshm
    emptyDir:
      medium: Memory
"""
POD = {
    "cpu": RESTRICTED + POD_HEAD + CONTAINER + security() + SHM_MOUNT,
    "cuda": RESTRICTED + POD_HEAD + CONTAINER + """    resources:
      limits:
        nvidia.com/gpu: 2
""" + security() + SHM_MOUNT,
    "rocm": "# Pod Security Standard: privileged (hostIPC: rocm asks for the host's IPC namespace; seccomp Unconfined:"
            " rocm asks for it; capabilities SYS_PTRACE: rocm adds them)\n" + POD_HEAD + GROUPS + "  hostIPC: true\n" + CONTAINER + """    resources:
      limits:
        amd.com/gpu: 2
""" + security("Unconfined", add="        - SYS_PTRACE\n"),
    "xpu": RESTRICTED + POD_HEAD + GROUPS + CONTAINER + """    resources:
      limits:
        gpu.intel.com/i915: 2
""" + security() + SHM_MOUNT,
    "gaudi": "# Pod Security Standard: privileged (hostIPC: gaudi asks for the host's IPC namespace; hostNetwork:"
             " gaudi's sessions use the host's network; capabilities SYS_NICE: gaudi adds them)\n" + POD_HEAD + "  hostIPC: true\n  hostNetwork: true\n" + CONTAINER + """    env:
    - name: OMPI_MCA_btl_vader_single_copy_mechanism
      value: none
    resources:
      limits:
        habana.ai/gaudi: 2
""" + security(add="        - SYS_NICE\n"),
}
GROUP_NOTE = "supplementalGroups are this host's device groups; a node's ids may differ"
NAME_NOTE = "generateName: `kubectl create -f` names each Pod anew (`kubectl apply` needs --name)"
ULIMIT_NOTE = "ulimits memlock=-1 cannot be set in a Pod: the node's runtime defaults apply"
POD_NOTES = {"cpu": (NAME_NOTE,),
             "cuda": ("ulimits memlock=-1 stack=67108864 cannot be set in a Pod: the node's runtime defaults apply",
                      NAME_NOTE),
             "rocm": (GROUP_NOTE, NAME_NOTE), "xpu": (GROUP_NOTE, NAME_NOTE),
             "gaudi": ("the node's container runtime must be habana's (its operator makes it the default)",
                       ULIMIT_NOTE, NAME_NOTE)}


@pytest.mark.parametrize("vendor", VENDORS)
def test_kubernetes_pod_for_each_vendor(vendor: str, dev_root: Path) -> None:
    rendered = render("kubernetes", chosen(vendor, dev_root))
    found = gids(dev_root)
    assert rendered.text == POD[vendor].format(g0=found[0], g1=found[1])
    assert rendered.notes == POD_NOTES[vendor]


def validate_pod(text: str) -> None:
    documents = list(yaml.safe_load_all(text))
    assert len(documents) == 1
    kubernetes_validate.validate(documents[0], K8S_VERSION, strict=True)


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_pod_passes_the_kubernetes_openapi_schema(vendor: str, dev_root: Path) -> None:
    """Each form: recommend's, a session's (its workspace noted, not mounted), and everything passed through."""
    extras = Extras((Mount("/data", "/data", read_only=True),), (Port.parse("8888:8888"),), (("A", "1"),), "dev")
    for form in (chosen(vendor, dev_root), session(vendor, dev_root), session(vendor, dev_root, extras=extras)):
        validate_pod(render("kubernetes", form).text)


def test_the_schema_check_is_strict() -> None:
    """A field the API does not have fails: the validation above can fail."""
    pod = yaml.safe_load(render("kubernetes", launch(IMAGE, "cpu")).text)
    pod["spec"]["volumes"][0]["emptyDir"]["bogus"] = 1
    with pytest.raises(kubernetes_validate.ValidationError, match="bogus"):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_a_pod_carries_what_is_passed_through(dev_root: Path) -> None:
    extras = Extras((Mount("/data", "/data", read_only=True),), (Port.parse("127.0.0.1:6006:6006"),),
                    (("WANDB_MODE", "offline"),), "train")
    pod = yaml.safe_load(render("kubernetes", session("cpu", dev_root, extras=extras)).text)
    container = pod["spec"]["containers"][0]
    assert pod["metadata"]["name"] == "train"
    assert container["command"] == ["/usr/bin/tini", "-s", "-g", "--", "/opt/accel-images/guard.sh", "python", "-V"]
    assert container["env"] == [{"name": "WANDB_MODE", "value": "offline"}]
    assert container["ports"] == [{"containerPort": 6006, "protocol": "TCP"}]
    assert container["volumeMounts"][1] == {"name": "volume-1", "mountPath": "/data", "readOnly": True}
    assert pod["spec"]["volumes"][1] == {"name": "volume-1", "hostPath": {"path": "/data"}}


# ---- Compose --------------------------------------------------------------------------------------
# Docker, "Enable GPU access with Docker Compose": deploy.resources.reservations.devices with "capabilities" ("You
#   must set the capabilities field") and "count. Specified as an integer or the value all".
#   https://docs.docker.com/compose/how-tos/gpu-support/
# compose-spec 05-services: devices "HOST_PATH:CONTAINER_PATH[:CGROUP_PERMISSIONS]", group_add, runtime, cap_add,
#   security_opt, ipc, ulimits. A host user joins group 100, the image's Python environment's (host/launch.py). https://github.com/compose-spec/compose-spec/blob/main/05-services.md

SERVICE_HEAD = """services:
  dev:
    image: reg.example/ai/pytorch:T
    command:
    - python
    - -V
    user: 1234:5678
    working_dir: /workspace
    volumes:
    - /src:/workspace
"""
COMPOSE = {
    "cpu": SERVICE_HEAD + "    group_add:\n    - '100'\n    ipc: host\n",
    "cuda": SERVICE_HEAD + """    group_add:
    - '100'
    ipc: host
    ulimits:
      memlock: -1
      stack: 67108864
    deploy:
      resources:
        reservations:
          devices:
          - capabilities:
            - gpu
            count: all
""",
    "rocm": SERVICE_HEAD + """    devices:
    - /dev/kfd:/dev/kfd
    - /dev/dri:/dev/dri
    group_add:
    - '{g0}'
    - '{g1}'
    - '100'
    cap_add:
    - SYS_PTRACE
    security_opt:
    - seccomp=unconfined
    ipc: host
""",
    "xpu": SERVICE_HEAD + """    devices:
    - /dev/dri:/dev/dri
    group_add:
    - '{g0}'
    - '{g1}'
    - '100'
    ipc: host
""",
    "gaudi": SERVICE_HEAD + """    environment:
      HABANA_VISIBLE_DEVICES: all
      OMPI_MCA_btl_vader_single_copy_mechanism: none
    group_add:
    - '100'
    runtime: habana
    cap_add:
    - SYS_NICE
    ipc: host
    network_mode: host
    ulimits:
      memlock: -1
""",
}


@pytest.mark.parametrize("vendor", VENDORS)
def test_compose_service_for_each_vendor(vendor: str, dev_root: Path) -> None:
    rendered = render("compose", session(vendor, dev_root))
    found = gids(dev_root)
    assert rendered.text == COMPOSE[vendor].format(g0=found[0], g1=found[1])
    assert rendered.notes == ()


def compose_schema() -> jsonschema.Draft202012Validator:
    text = resources.files("check_jsonschema").joinpath("builtin_schemas/vendor/compose-spec.json").read_text()
    return jsonschema.Draft202012Validator(json.loads(text))


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_compose_file_passes_the_compose_spec_schema(vendor: str, dev_root: Path) -> None:
    schema = compose_schema()
    extras = Extras((Mount("/data", "/data", read_only=True),), (Port.parse("8888:8888"),), (("A", "1"),), "dev")
    for form in (chosen(vendor, dev_root), session(vendor, dev_root, extras=extras)):
        errors = [error.message for error in schema.iter_errors(yaml.safe_load(render("compose", form).text))]
        assert errors == []
    bogus = yaml.safe_load(render("compose", chosen(vendor, dev_root)).text)
    bogus["services"]["dev"]["bogus_key"] = 1
    assert any("bogus_key" in error.message for error in schema.iter_errors(bogus))  # the check can fail


def test_compose_keeps_a_terminal_open_without_a_command(dev_root: Path) -> None:
    service = yaml.safe_load(render("compose", chosen("cpu", dev_root)).text)["services"]["dev"]
    assert service == {"image": IMAGE, "stdin_open": True, "tty": True, "ipc": "host"}


# ---- what is passed through, everywhere -------------------------------------------------------------

EXTRAS = Extras((Mount("/data", "/data", read_only=True),), (Port.parse("8888:8888"),), (("WANDB_MODE", "offline"),),
                "nb", ("--network=host",))


def test_docker_and_podman_pass_volumes_ports_env_name_and_raw_arguments(dev_root: Path) -> None:
    identity = (("GIT_AUTHOR_NAME", "Jane Doe"),)
    for engine in ("docker", "podman"):
        text = render(engine, session("cpu", dev_root, extras=EXTRAS, identity=identity)).text
        assert ("-w /workspace -v /data:/data:ro -p 8888:8888 -e 'GIT_AUTHOR_NAME=Jane Doe' -e WANDB_MODE=offline"
                f" --name nb --network=host {IMAGE} python -V\n") in text


def test_command_line_runtimes_translate_what_is_passed_through(dev_root: Path) -> None:
    apptainer = render("apptainer", session("cpu", dev_root, extras=EXTRAS))
    assert apptainer.text == ("apptainer run --env WANDB_MODE=offline --bind /src:/workspace --pwd /workspace"
                              f" --bind /data:/data:ro --network=host docker://{IMAGE} python -V\n")
    assert apptainer.notes == ("ports need no publishing: the container shares the host's network",
                               "--name nb has no meaning for `apptainer run`")
    enroot = render("enroot", session("cpu", dev_root, extras=EXTRAS))
    assert enroot.text == ("env WANDB_MODE=offline srun '--container-image=reg.example#ai/pytorch:T'"
                           " --container-mounts=/src:/workspace,/data:/data:ro --container-workdir=/workspace"
                           " --container-name=nb --network=host /usr/bin/tini -s -g -- /opt/accel-images/guard.sh python -V\n")


@pytest.mark.parametrize("engine", ["kubernetes", "compose"])
def test_a_file_has_no_place_for_raw_engine_arguments(engine: str, dev_root: Path) -> None:
    with pytest.raises(InputError, match="--network=host has nowhere to go"):
        render(engine, session("cpu", dev_root, extras=EXTRAS))


@pytest.mark.parametrize("parse, text, message", [
    (Mount.parse, "/data", "is not SRC:DST"), (Mount.parse, "/data:rel", "must be absolute"),
    (Mount.parse, "/a:/b:rx", "is not SRC:DST"), (Port.parse, "http", "is not [IP:][HOST:]CONTAINER"),
    (Port.parse, "99999", "is not [IP:][HOST:]CONTAINER"), (parse_env, "A", "is not NAME=VALUE"),
    (parse_env, "1A=b", "is not NAME=VALUE"),
])
def test_malformed_pass_through_is_bad_input(parse, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        parse(text)


def test_a_relative_mount_source_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Mount.parse("data:/data:ro") == Mount(str(tmp_path / "data"), "/data", True)


def test_the_git_identity_is_what_git_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".gitconfig").write_text("[user]\n\tname = Jane Doe\n\temail = jane@example.com\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    assert git_identity(tmp_path) == (("GIT_AUTHOR_NAME", "Jane Doe"), ("GIT_COMMITTER_NAME", "Jane Doe"),
                                      ("GIT_AUTHOR_EMAIL", "jane@example.com"),
                                      ("GIT_COMMITTER_EMAIL", "jane@example.com"))
    (tmp_path / ".gitconfig").write_text("")
    assert git_identity(tmp_path) == ()


def test_every_engine_renders_every_vendor(dev_root: Path) -> None:
    assert set(ENGINES) == {"docker", "podman", "apptainer", "enroot", "kubernetes", "compose"}
    for engine in ENGINES:
        for vendor in VENDORS:
            assert render(engine, session(vendor, dev_root)).text.endswith("\n")


# ---- the commands ---------------------------------------------------------------------------------

def host_json(tmp_path: Path, **fields: object) -> str:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"vendor": "cpu", **fields}))
    return str(path)


A100 = {"vendor": "cuda", "driver_version": "580.126.09", "stack_version": "13.0",
        "gpu_names": ["NVIDIA A100-SXM4-40GB"], "gpu_archs": ["8.0"], "device_count": 1}


def test_recommend_prints_one_valid_pod_naming_the_hosts_resource(tmp_path: Path) -> None:
    from accel_images.cli import fanout
    result = CliRunner().invoke(fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--engine",
                                                           "kubernetes", "--host-json", host_json(tmp_path, **A100),
                                                           "--registry", "ghcr.io/acme", "--from-matrix"])
    assert result.exit_code == 0, result.output
    validate_pod(result.stdout)
    pod = yaml.safe_load(result.stdout)
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert "note: the image by tag: with --registry the catalogue gives its digest" in result.stderr


# Intel's GPU plugin names a GPU after the kernel driver bound to it ("gpu.intel.com/i915 | Legacy i915 KMD ...
# provided GPU instance", "gpu.intel.com/xe | xe KMD provided GPU instance": intel-device-plugins-for-kubernetes
# cmd/gpu_plugin/README.md): the target node's driver, as its host description records it, not this machine's.
B580 = {"vendor": "xpu", "gpu_names": ["Intel(R) Arc(TM) B580 Graphics"], "device_count": 1}


def intel_pod(tmp_path: Path, **fields: object) -> tuple[dict[str, object], str]:
    """`recommend --engine kubernetes --host-json` for an Intel host: the Pod's limits and the notes."""
    from accel_images.cli import fanout
    result = CliRunner().invoke(fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--engine",
                                                           "kubernetes", "--host-json", host_json(tmp_path, **fields)])
    assert result.exit_code == 0, result.output
    validate_pod(result.stdout)
    return yaml.safe_load(result.stdout)["spec"]["containers"][0]["resources"]["limits"], result.stderr


@pytest.mark.parametrize("drivers, resource", [(["xe"], "gpu.intel.com/xe"), (["i915"], "gpu.intel.com/i915"),
                                               (["i915", "xe"], "gpu.intel.com/xe")])
def test_the_intel_resource_is_the_described_hosts_kernel_driver(tmp_path: Path, drivers: list[str],
                                                                  resource: str) -> None:
    limits, notes = intel_pod(tmp_path, **B580, kernel_drivers=drivers)
    assert limits == {resource: 1}
    assert "kernel driver" not in notes


def test_an_intel_host_of_unknown_kernel_driver_gets_i915_and_a_note_saying_so(tmp_path: Path) -> None:
    limits, notes = intel_pod(tmp_path, **B580)
    assert limits == {"gpu.intel.com/i915": 1}
    assert ("note: the host description names no Intel GPU kernel driver: gpu.intel.com/i915 assumed; a node whose"
            " GPUs the xe driver binds offers gpu.intel.com/xe") in notes


def test_recommend_json_carries_the_rendered_engine(tmp_path: Path) -> None:
    from accel_images.cli import fanout
    result = CliRunner().invoke(fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--engine", "podman",
                                                           "--host-json", host_json(tmp_path, **A100), "--json",
                                                           "--registry", "ghcr.io/acme", "--from-matrix"])
    record = json.loads(result.stdout)
    assert record["run"]["engine"] == "podman"
    assert record["run"]["text"].startswith("podman run --rm -it --device nvidia.com/gpu=all")
    assert record["docker_run"].startswith("docker run --rm -it --gpus all")


def test_run_prints_what_it_cannot_start_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_images.cli import session as cli_session
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    result = CliRunner().invoke(cli_session.run_command, ["img:2.14.0-cuda13.0-py3.12-ubuntu24.04", "--engine",
                                                          "apptainer", "--workspace", str(tmp_path), "-v",
                                                          f"{tmp_path}:/data", "--", "python", "train.py"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"apptainer run --nv --bind {tmp_path}:/workspace --pwd /workspace --bind"
                             f" {tmp_path}:/data docker://img:2.14.0-cuda13.0-py3.12-ubuntu24.04 python train.py\n")
    assert "note: ulimits memlock=-1 stack=67108864 not set: your own apply" in result.stderr


def test_run_refuses_a_malformed_volume_in_one_line(tmp_path: Path) -> None:
    from accel_images.cli import session as cli_session
    result = CliRunner().invoke(cli_session.run_command, ["img:t", "--vendor", "cpu", "-v", "/data", "--print"])
    assert result.exit_code == 2
    assert result.stderr == "accel-images: error: --volume: '/data' is not SRC:DST[:ro|rw]\n"


# ---- Pod Security Standards (issue 41, 3) ---------------------------------------------------------
# kubernetes.io/docs/concepts/security/pod-security-standards: Baseline forbids host namespaces (hostNetwork,
#   hostPID, hostIPC), privileged containers, capabilities added beyond its list, hostPath volumes, hostPorts and
#   the Unconfined seccomp profile; Restricted also requires allowPrivilegeEscalation: false, runAsNonRoot: true,
#   a non-zero runAsUser, seccompProfile RuntimeDefault or Localhost, and capabilities drop ALL (add at most
#   NET_BIND_SERVICE). Written here from that page, apart from the renderer's own decision.

BASELINE_ADDS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def pss_level(pod: dict[str, object]) -> str:
    """The strictest Pod Security Standard `pod` meets, by the page's checks."""
    spec: dict = pod["spec"]  # type: ignore[assignment]
    pod_context = spec.get("securityContext", {})
    containers = spec["containers"]
    contexts = [c.get("securityContext", {}) for c in containers]
    seccomp = [c.get("seccompProfile", pod_context.get("seccompProfile", {})).get("type") for c in contexts]
    baseline = not (spec.get("hostIPC") or spec.get("hostNetwork") or spec.get("hostPID")
                    or any("hostPath" in volume for volume in spec.get("volumes", []))
                    or any(c.get("privileged") for c in contexts)
                    or any(set(c.get("capabilities", {}).get("add", [])) - BASELINE_ADDS for c in contexts)
                    or any(port.get("hostPort") for c in containers for port in c.get("ports", []))
                    or "Unconfined" in seccomp)
    if not baseline:
        return "privileged"
    restricted = (all(c.get("allowPrivilegeEscalation") is False for c in contexts)
                  and all(c.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True for c in contexts)
                  and all(c.get("runAsUser", pod_context.get("runAsUser")) != 0 for c in contexts)
                  and all(kind in ("RuntimeDefault", "Localhost") for kind in seccomp)
                  and all("ALL" in c.get("capabilities", {}).get("drop", []) for c in contexts)
                  and all(set(c.get("capabilities", {}).get("add", [])) <= {"NET_BIND_SERVICE"} for c in contexts)
                  and all(set(volume) - {"name"} <= {"emptyDir", "configMap", "secret", "persistentVolumeClaim",
                                                     "projected", "downwardAPI", "csi", "ephemeral"}
                          for volume in spec.get("volumes", [])))
    return "restricted" if restricted else "baseline"


NEEDS = {"cpu": "restricted", "cuda": "restricted", "xpu": "restricted", "rocm": "privileged", "gaudi": "privileged"}


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_pod_meets_the_strictest_pod_security_standard_its_vendor_allows(vendor: str, dev_root: Path) -> None:
    """Before: no runAsNonRoot, allowPrivilegeEscalation, dropped capabilities or seccomp profile, so even a CPU
    Pod was refused by a namespace enforcing `restricted`; and nothing said which vendors need more."""
    for form in (replace(launch(IMAGE, vendor, dev_root), digest=DIGEST), session(vendor, dev_root)):
        text = render("kubernetes", form).text
        pod = yaml.safe_load(text)
        assert pss_level(pod) == NEEDS[vendor]
        assert text.splitlines()[0].startswith(f"# Pod Security Standard: {NEEDS[vendor]}")
        validate_pod(text)
    with_volume = session(vendor, dev_root, extras=Extras((Mount("/data", "/data"),)))
    assert pss_level(yaml.safe_load(render("kubernetes", with_volume).text)) == "privileged"


def test_the_help_says_which_vendors_need_more_than_restricted_and_why() -> None:
    from accel_images.cli import fanout, session as cli_session
    for command in (fanout.recommend_command, cli_session.run_command):
        shown = " ".join(CliRunner().invoke(command, ["--help"]).output.split())
        assert "Kubernetes Pods meet the restricted Pod Security Standard, except: rocm needs privileged (hostIPC," \
               " seccomp Unconfined, capabilities SYS_PTRACE); gaudi needs privileged (hostIPC, hostNetwork," \
               " capabilities SYS_NICE)" in shown


def test_every_pod_gets_a_name_of_its_own(dev_root: Path) -> None:
    """Before: every Pod was named `accel-images`, so a second user's `kubectl apply` replaced the first's."""
    pod = yaml.safe_load(render("kubernetes", launch(IMAGE, "cpu", dev_root)).text)
    assert pod["metadata"] == {"generateName": "accel-images-"}
    named = yaml.safe_load(render("kubernetes", replace(launch(IMAGE, "cpu", dev_root), extras=Extras(name="jane-1"))).text)
    assert named["metadata"] == {"name": "jane-1"}


@pytest.mark.parametrize("name, message", [
    ("my name", "--name: 'my name' is not a container name"),
    ("My_Pod", "--name: 'My_Pod' is not a Pod name: lowercase letters, digits, '-' and '.'"),
])
def test_a_name_the_api_server_would_refuse_is_one_line(tmp_path: Path, name: str, message: str) -> None:
    """Before: `--name 'my name'` became a Pod name the API server rejects."""
    from accel_images.cli import session as cli_session
    result = CliRunner().invoke(cli_session.run_command, ["img:t", "--vendor", "cpu", "--engine", "kubernetes",
                                                          "--name", name, "--print"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"accel-images: error: {message}")


def test_slurm_and_kubernetes_ask_for_the_devices_the_host_description_counts(tmp_path: Path) -> None:
    """Before: `--gres=gpu:1` and `nvidia.com/gpu: 1` whatever the node had."""
    from accel_images.cli import fanout
    node = host_json(tmp_path, **{**A100, "device_count": 4})
    args = ["--matrix", str(FROZEN_MATRIX), "--host-json", node, "--registry", "ghcr.io/acme", "--from-matrix"]
    enroot = CliRunner().invoke(fanout.recommend_command, [*args, "--engine", "enroot"])
    assert enroot.exit_code == 0, enroot.output
    assert enroot.stdout.splitlines()[-1].startswith("srun --pty --gres=gpu:4 ")
    pod = yaml.safe_load(CliRunner().invoke(fanout.recommend_command, [*args, "--engine", "kubernetes"]).stdout)
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}


def test_without_a_count_one_device_is_asked_for_and_the_notes_say_why(dev_root: Path) -> None:
    rendered = render("enroot", replace(session("cuda", dev_root), device_count=None))
    assert "--gres=gpu:1 " in rendered.text
    assert rendered.notes[0] == "--gres=gpu:1: the host description counts no cuda devices (pass --host-json with" \
                                " a node's)"


# ---- values each runtime would split or expand (issue 37, B10) -------------------------------------

def test_an_apptainer_value_with_a_comma_travels_whole(dev_root: Path) -> None:
    """Before: `--env CUDA_VISIBLE_DEVICES=0,1`, which Apptainer reads as two settings, `CUDA_VISIBLE_DEVICES=0` and `1`."""
    form = session("cpu", dev_root, extras=Extras(environment=(("CUDA_VISIBLE_DEVICES", "0,1"), ("A", "1"))))
    text = render("apptainer", form).text
    assert text.startswith("env APPTAINERENV_CUDA_VISIBLE_DEVICES=0,1 apptainer run ")
    assert "--env A=1 " in text and "--env CUDA" not in text


@pytest.mark.parametrize("engine", ["apptainer", "enroot"])
@pytest.mark.parametrize("where", ["workspace", "volume"])
@pytest.mark.parametrize("path", ["/data/a,b", "/data/v:2"])
def test_a_path_apptainer_or_enroot_would_split_is_refused_in_one_line(engine: str, where: str, path: str,
                                                                       dev_root: Path) -> None:
    """Before: `--bind /data/a,b:/d` bound /data/a and `b:/d`; `--container-mounts` split the same way."""
    form = (replace(session("cpu", dev_root), workspace=Path(path)) if where == "workspace"
            else session("cpu", dev_root, extras=Extras((Mount(path, "/d"),))))
    with pytest.raises(InputError) as raised:
        render(engine, form)
    line = raised.value.one_line()
    assert line.startswith(f"--{where}: {path!r} holds ") and f"which {engine} reads as a separator" in line


def compose_reads(value: str) -> str:
    """What Compose makes of a value (compose-spec 12-interpolation): `$$` is `$`; `$NAME`, `${...}` a variable;
    `$(` an error. Raises where the value would not arrive as written."""
    out, index = [], 0
    while index < len(value):
        if value[index] == "$":
            following = value[index + 1:index + 2]
            if following == "$":
                out.append("$")
                index += 2
                continue
            raise AssertionError(f"Compose interpolates or refuses {value[index:]!r}")
        out.append(value[index])
        index += 1
    return "".join(out)


def kubelet_reads(value: str) -> str:
    """What the kubelet makes of a command word or env value: `$$` is `$`, `$(NAME)` the variable's value."""
    out, index = [], 0
    while index < len(value):
        if value[index] == "$" and value[index + 1:index + 2] == "$":
            out.append("$")
            index += 2
        elif value[index] == "$" and value[index + 1:index + 2] == "(" and ")" in value[index:]:
            end = value.index(")", index)
            out.append(f"<{value[index + 2:end]}>")
            index = end + 1
        else:
            out.append(value[index])
            index += 1
    return "".join(out)


DOLLARS = ("$HOME", "a$$b", "$(date)", "${X:-y}", "cost: 5$")


def test_compose_receives_every_dollar_as_given(dev_root: Path) -> None:
    """Before: Compose expanded `$HOME`, read `$$` as `$` and refused `$(`."""
    form = replace(session("cpu", dev_root), command=("echo", *DOLLARS),
                   extras=Extras(environment=tuple((f"V{n}", value) for n, value in enumerate(DOLLARS))))
    service = yaml.safe_load(render("compose", form).text)["services"]["dev"]
    assert [compose_reads(word) for word in service["command"]] == ["echo", *DOLLARS]
    assert [compose_reads(value) for value in service["environment"].values()] == list(DOLLARS)


def test_the_kubelet_receives_every_dollar_as_given(dev_root: Path) -> None:
    """Before: `$(date)` in a command or an env value was a reference the kubelet expanded."""
    form = replace(launch(IMAGE, "cpu", dev_root), command=("echo", *DOLLARS),
                   extras=Extras(environment=tuple((f"V{n}", value) for n, value in enumerate(DOLLARS))))
    container = yaml.safe_load(render("kubernetes", form).text)["spec"]["containers"][0]
    assert [kubelet_reads(word) for word in container["command"]][-len(DOLLARS):] == list(DOLLARS)
    assert [kubelet_reads(item["value"]) for item in container["env"]] == list(DOLLARS)


def test_the_printed_line_is_the_line_that_runs(tmp_path: Path) -> None:
    """Before: a tab or a no-break space was shown as `\\t` or `\\xa0` inside quotes, which a shell reads as
    other characters than the ones `run` executes."""
    import shutil
    import subprocess
    from accel_images.cli import session as cli_session
    args = ["img:t", "--vendor", "cpu", "--workspace", str(tmp_path), "-e", "SEP=a\tb", "-e", "NAME=x\u00a0y"]
    command = ["--", "python", "-c", "print('tab\\there')", "new\nline", "it's"]
    shown = CliRunner().invoke(cli_session.run_command, [*args, "--print", *command])
    planned = CliRunner().invoke(cli_session.run_command, [*args, "--json", *command])
    assert shown.exit_code == 0 and planned.exit_code == 0, shown.output + planned.output
    assert shown.stdout.endswith("\n") and shown.stdout[:-1].isprintable()  # one line, every character visible
    bash = shutil.which("bash")
    assert bash is not None
    read_back = subprocess.run([bash, "-c", 'printf "%s\\0" ' + shown.stdout.rstrip("\n")], capture_output=True,
                               check=True).stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]
    assert read_back == json.loads(planned.stdout)["argv"]
