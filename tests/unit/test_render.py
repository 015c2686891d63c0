"""Rendering: mirrors, pip sources, strict templates, and the images/ tree.

What each vendor's Dockerfile says is pinned by exact-text tests per vendor
(tests/unit/vendors/test_<vendor>.py); the whole rendered tree is kept true by `render --check`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from accel_images.render import companions
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.errors import InputError
from accel_images.plan.matrix import User, load_matrix
from accel_images.render.contexts import (FACTS_SOURCE, GUARD_SOURCE, SMOKE_SOURCE, guard_script, RenderedContext, Renderer,
                                           RenderOptions, existing_tree, pip_source_args, stale_paths, tree_of,
                                           write_build_context, write_tree)
from accel_images.model.reference import Mirror, mirrored, split_reference
from accel_images.smoke import workload
from accel_images.plan.variants import Expansion, expand, make_variant
from accel_images.model.variant import Variant
from frozen import MATRIX as FROZEN_MATRIX

REPO = Path(__file__).resolve().parents[2]
IMAGE = "accel-images/pytorch"

SAMPLE_VARIANTS = {
    "2.13.0-cpu-py3.11-debian12": ("cpu", None, "2.13", "3.11", "debian12", "runtime"),
    "2.14.1-cuda13.2-py3.12-ubuntu24.04-devel": ("cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "devel"),
    "2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel": ("gaudi", "1.24.1", "2.11", "3.10", "ubuntu22.04", "devel"),
}

OPTION_SETS = {
    "upstream": RenderOptions(),
    "mirrored": RenderOptions(mirrors=(Mirror.parse("docker.io=127.0.0.1:5000"),
                                       Mirror.parse("vault.habana.ai=mirror.example.com/habana")),
                              pip_index_url="http://127.0.0.1:8080/simple/{index}"),
    "wheelhouse": RenderOptions(pip_find_links=Path("/srv/wheels"), without_companions=("torchaudio", "torchvision")),
}


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="module")
def renderer(kb: KnowledgeBase) -> Renderer:
    return Renderer(kb)


@pytest.fixture(scope="module")
def published(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(FROZEN_MATRIX), kb)


@pytest.fixture(scope="module")
def dockerfiles(renderer: Renderer, published: Expansion) -> Callable[[str], list[tuple[Variant, str]]]:
    """Every published variant's Dockerfile under an option set, rendered once for all the tests that read them."""
    @functools.cache
    def rendered(option_set: str) -> list[tuple[Variant, str]]:
        return [(variant, renderer.dockerfile(variant, published, OPTION_SETS[option_set]))
                for variant in published.variants]
    return rendered


def bare_expansion() -> Expansion:
    return Expansion(variants=(), pruned=(), image=IMAGE, user=User())


def render(renderer: Renderer, variant: Variant, options: RenderOptions = RenderOptions()) -> str:
    return renderer.dockerfile(variant, bare_expansion(), options)


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            result.append((word.upper(), rest))
            pending = ""
    return result


def labels_of(dockerfile: str, platform: str = "linux/amd64") -> dict[str, str]:
    """The labels the image of `platform` carries (its own stage's, where the Dockerfile has one per platform)."""
    found: dict[str, str] = {}
    for word, rest in image_steps(dockerfile, platform):
        if word == "LABEL":
            found.update(re.findall(r'(\S+?)="([^"]*)"', rest))
    return found


def image_steps(dockerfile: str, platform: str = "linux/amd64") -> list[tuple[str, str]]:
    """The instructions the image a build for `platform` is made of: its last stage and the stages that
    one is built FROM, with TARGETARCH standing for the platform's architecture (as BuildKit sets it and
    the builder passes it), so a Dockerfile with a stage per architecture yields that platform's."""
    arch = platform.split("/")[1]
    stages: list[tuple[str, str, list[tuple[str, str]]]] = []
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            ref, _, name = rest.replace("${TARGETARCH}", arch).partition(" AS ")
            stages.append((name.strip(), ref.strip(), [(word, rest)]))
        elif stages:
            stages[-1][2].append((word, rest))
    chain: list[tuple[str, str]] = []
    current: tuple[str, str, list[tuple[str, str]]] | None = stages[-1]
    while current is not None:
        chain = current[2] + chain
        current = next((stage for stage in stages if stage[0] and stage[0] == current[1]), None)
    return chain


# -- invariants of every rendered Dockerfile ----------------------------------------------

@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_dockerfile_keeps_the_house_rules(dockerfiles: Callable[[str], list[tuple[Variant, str]]],
                                                option_set: str) -> None:
    for variant, text in dockerfiles(option_set):
        where = f"{variant.key} ({option_set})"
        assert text.startswith(f"# GENERATED by accel-images from templates/vendors/{variant.vendor}.Dockerfile.j2"), where
        assert "--mount" not in text and "<<" not in text, where
        assert text.endswith("\n") and not text.endswith("\n\n"), where
        steps = instructions(text)
        users = [rest for word, rest in steps if word == "USER"]
        assert users and users[-1] == "${USER_UID}:${USER_GID}", where
        assert ("ARG", "USER_UID=1000") in steps and ("ARG", "USER_GID=1000") in steps, where
        assert ("COPY", "--from=files /files/ /") in steps, where          # the image's files, dated in their stage
        assert "install -D -m 0644 /in/smoke.py /files/opt/accel-images/smoke.py" in text, where
        assert "install -D -m 0755 /in/guard.sh /files/opt/accel-images/guard.sh" in text, where
        assert any(word == "ENV" and "PIP_CONSTRAINT=/opt/accel-images/constraints.txt" in rest
                   for word, rest in steps), where
        labels = labels_of(text, variant.platform)
        assert labels["org.opencontainers.image.base.name"] == variant.base_image, where
        assert labels["org.opencontainers.image.title"] == f"{IMAGE}:{variant.tag}", where
        for key, value in variant.labels().items():
            assert labels[key] == value, (where, key)
        for key in ("vendor", "stack", "torch", "python", "min-driver", "gpu-archs"):
            assert f"io.accel-images.{key}" in labels, (where, key)
        image = image_steps(text, variant.platform)
        assert [rest for word, rest in image if word in ("CMD", "RUN", "COPY")][-1] == '["/bin/bash"]', where


def test_gpu_labels_carry_driver_and_architectures(renderer: Renderer, kb: KnowledgeBase) -> None:
    labels = labels_of(render(renderer, make_variant(kb, *SAMPLE_VARIANTS["2.14.1-cuda13.2-py3.12-ubuntu24.04-devel"])))
    assert labels["io.accel-images.min-driver"] == "595.58.03"
    assert labels["io.accel-images.mvc-driver"] == "580"
    assert labels["io.accel-images.gpu-archs"] == "7.5,8.0,8.6,9.0,10.0,12.0"  # no PTX: pytorch/pytorch#175567
    assert labels["io.accel-images.stack"] == "13.2"


def test_gaudi_never_installs_torch(renderer: Renderer, kb: KnowledgeBase) -> None:
    text = render(renderer, make_variant(kb, *SAMPLE_VARIANTS["2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel"]))
    assert "pip install" not in text
    froms = [rest for w, rest in instructions(text) if w == "FROM"]
    assert len(froms) == 2 and froms[0] == f"{froms[1]} AS files"   # one image stage, plus the files stage


def test_context_holds_dockerfile_smoke_and_guard(renderer: Renderer, kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.13.0-cpu-py3.11-debian12"])
    context = renderer.context(variant, bare_expansion(), RenderOptions())
    assert set(context.files) == {"Dockerfile", "smoke.py", "facts.py", "guard.sh", "profile.sh", "banner.sh",
                                  "pip.conf"}
    assert context.files["smoke.py"] == SMOKE_SOURCE.read_bytes()
    assert context.files["facts.py"] == FACTS_SOURCE.read_bytes()
    assert context.files["guard.sh"] == guard_script("cpu")
    assert guard_script("cpu").startswith(GUARD_SOURCE.read_bytes().split(b"# @VENDOR_CHECK@")[0])
    assert context.template == "vendors/cpu.Dockerfile.j2"


# -- mirrors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, split", [
    ("debian:bookworm-slim", ("docker.io", "library/debian:bookworm-slim")),
    ("nvidia/cuda:13.2.1-devel-ubuntu24.04", ("docker.io", "nvidia/cuda:13.2.1-devel-ubuntu24.04")),
    ("nvcr.io/nvidia/cuda:13.2.1-base-ubi9", ("nvcr.io", "nvidia/cuda:13.2.1-base-ubi9")),
    ("vault.habana.ai/gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0:1.24.1-482",
     ("vault.habana.ai", "gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0:1.24.1-482")),
    ("localhost:5000/local/debian:bookworm", ("localhost:5000", "local/debian:bookworm")),
    ("localhost/debian:12", ("localhost", "debian:12")),
])
def test_split_reference(ref: str, split: tuple[str, str]) -> None:
    assert split_reference(ref) == split


@pytest.mark.parametrize("mirror, ref, expected", [
    ("docker.io=127.0.0.1:5000", "debian:bookworm-slim", "127.0.0.1:5000/library/debian:bookworm-slim"),
    ("docker.io=harbor.example.com/dockerhub", "nvidia/cuda:13.2.1-devel-ubuntu24.04",
     "harbor.example.com/dockerhub/nvidia/cuda:13.2.1-devel-ubuntu24.04"),
    ("docker.io=harbor.example.com/dockerhub/", "ubuntu:24.04", "harbor.example.com/dockerhub/library/ubuntu:24.04"),
    ("nvcr.io=mirror.example.com/nvcr", "nvcr.io/nvidia/cuda:13.2.1-base-ubi9",
     "mirror.example.com/nvcr/nvidia/cuda:13.2.1-base-ubi9"),
    ("vault.habana.ai=registry.example.cn:8443/habana/vault",
     "vault.habana.ai/gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0:1.24.1-482",
     "registry.example.cn:8443/habana/vault/gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0:1.24.1-482"),
    ("nvcr.io=mirror.example.com/nvcr", "debian:bookworm-slim", "debian:bookworm-slim"),
])
def test_mirrored(mirror: str, ref: str, expected: str) -> None:
    assert mirrored(ref, [Mirror.parse(mirror)]) == expected


@pytest.mark.parametrize("text", ["docker.io", "=mirror.example.com", "docker.io=", "docker.io = mirror.example.com",
                                  "docker.io=mirror.example.com\n"])
def test_bad_mirror_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError) as caught:
        Mirror.parse(text)
    assert caught.value.field == "--registry-mirror"


def test_mirror_rewrites_every_stage(renderer: Renderer, kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.13.0-cpu-py3.11-debian12"])
    text = render(renderer, variant, RenderOptions(mirrors=(Mirror.parse("docker.io=127.0.0.1:5000"),)))
    froms = [rest for word, rest in instructions(text) if word == "FROM"]
    assert froms == ["127.0.0.1:5000/library/debian:bookworm-slim AS build",
                     "127.0.0.1:5000/library/debian:bookworm-slim AS files",
                     "127.0.0.1:5000/library/debian:bookworm-slim"]
    assert labels_of(text)["org.opencontainers.image.base.name"] == "debian:bookworm-slim"


def test_gaudi_mirror_with_a_path_prefix(renderer: Renderer, kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel"])
    text = render(renderer, variant, RenderOptions(mirrors=(Mirror.parse("vault.habana.ai=mirror.example.com/habana"),)))
    base = "mirror.example.com/habana/gaudi-docker/1.24.1/ubuntu22.04/habanalabs/pytorch-installer-2.11.0:1.24.1-482"
    assert [rest for word, rest in instructions(text) if word == "FROM"] == [f"{base} AS files", base]


# -- pip sources -------------------------------------------------------------------------------

def test_pip_index_default_and_override(kb: KnowledgeBase) -> None:
    cuda = make_variant(kb, "cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "runtime")
    rocm = make_variant(kb, "rocm", "7.14", "2.14", "3.12", "ubuntu24.04", "runtime")
    assert pip_source_args(cuda, RenderOptions()) == "--index-url https://download.pytorch.org/whl/cu132"
    templated = RenderOptions(pip_index_url="http://127.0.0.1:8080/whl/{index}")
    assert pip_source_args(cuda, templated) == "--index-url http://127.0.0.1:8080/whl/cu132"
    assert pip_source_args(rocm, templated) == "--index-url http://127.0.0.1:8080/whl/rocm7.14"
    fixed = RenderOptions(pip_index_url="https://pypi.example.com/simple")
    assert pip_source_args(cuda, fixed) == "--index-url https://pypi.example.com/simple"


@pytest.mark.parametrize("url", ["http://mirror.example.com/simple\n", "http://mirror.example.com/a b",
                                 "http://mirror.example.com/$(id)", "http://x;id", "ftp://mirror.example.com/",
                                 "mirror.example.com/simple"])
def test_odd_index_urls_are_input_errors(url: str) -> None:
    with pytest.raises(InputError) as caught:
        RenderOptions(pip_index_url=url)
    assert caught.value.field == "--pip-index-url"


def test_pip_index_override_reaches_the_dockerfile(renderer: Renderer, kb: KnowledgeBase) -> None:
    variant = make_variant(kb, "xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "runtime")
    text = render(renderer, variant, RenderOptions(pip_index_url="https://mirror.example.cn/pytorch/{index}"))
    assert '--index-url https://mirror.example.cn/pytorch/xpu "torch==2.14.1"' in text
    assert "download.pytorch.org" not in text


def test_wheelhouse_means_no_index_and_a_copy_in_the_build_stage_only(renderer: Renderer, kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.13.0-cpu-py3.11-debian12"])
    text = render(renderer, variant, RenderOptions(pip_find_links=Path("/srv/wheels"), without_companions=("torchvision",)))
    assert '--no-index --find-links /tmp/wheels "torch==2.13.0"' in text
    assert "--index-url" not in text
    steps = instructions(text)
    second_from = [i for i, (word, _) in enumerate(steps) if word == "FROM"][1]
    copies = [i for i, step in enumerate(steps) if step == ("COPY", "wheels/ /tmp/wheels/")]
    assert len(copies) == 1 and copies[0] < second_from
    assert "wheels" not in "".join(rest for _, rest in steps[second_from:] if "constraints" not in rest)


# -- strict templates ------------------------------------------------------------------------

@pytest.fixture
def templates_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "templates"
    shutil.copytree(REPO / "templates", copy)
    return copy


def test_undefined_variable_in_a_vendor_template_names_file_and_line(
        kb: KnowledgeBase, templates_copy: Path) -> None:
    child = templates_copy / "vendors" / "cpu.Dockerfile.j2"
    child.write_text(child.read_text() + "{% block build_system %}\n{{ super() }}\nRUN echo {{ no_such_variable }}\n"
                                           "{% endblock %}\n")
    line = child.read_text().splitlines().index("RUN echo {{ no_such_variable }}") + 1
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.13.0-cpu-py3.11-debian12"])
    with pytest.raises(InputError) as caught:
        Renderer(kb, templates_dir=templates_copy).dockerfile(variant, bare_expansion(), RenderOptions())
    assert caught.value.file == str(child)
    assert caught.value.line == line
    assert "no_such_variable" in caught.value.message
    assert caught.value.field == variant.key


def test_undefined_attribute_in_a_partial_names_the_partial(kb: KnowledgeBase, templates_copy: Path) -> None:
    partial = templates_copy / "partials" / "common.j2"
    partial.write_text(partial.read_text().replace('ACCEL_IMAGES_TAG="{{ v.tag }}"', 'ACCEL_IMAGES_TAG="{{ v.tagz }}"'))
    line = next(i for i, text in enumerate(partial.read_text().splitlines(), 1) if "v.tagz" in text)
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel"])
    with pytest.raises(InputError) as caught:
        Renderer(kb, templates_dir=templates_copy).dockerfile(variant, bare_expansion(), RenderOptions())
    assert (caught.value.file, caught.value.line) == (str(partial), line)
    assert "tagz" in caught.value.message


@pytest.mark.parametrize("relative", ["vendors/cuda.Dockerfile.j2", "partials/python.j2"])
def test_syntax_error_names_file_and_line(kb: KnowledgeBase, templates_copy: Path, relative: str) -> None:
    broken = templates_copy / relative
    lines = broken.read_text().splitlines() + ["{% if %}"]
    broken.write_text("\n".join(lines) + "\n")
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.14.1-cuda13.2-py3.12-ubuntu24.04-devel"])
    with pytest.raises(InputError) as caught:
        Renderer(kb, templates_dir=templates_copy).dockerfile(variant, bare_expansion(), RenderOptions())
    assert caught.value.file == str(broken)
    assert caught.value.line == len(lines)
    assert "syntax error" in caught.value.message


def test_missing_template_is_an_input_error(kb: KnowledgeBase, templates_copy: Path) -> None:
    (templates_copy / "vendors" / "xpu.Dockerfile.j2").unlink()
    variant = make_variant(kb, "xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "runtime")
    with pytest.raises(InputError, match="template not found"):
        Renderer(kb, templates_dir=templates_copy).dockerfile(variant, bare_expansion(), RenderOptions())


# -- the images/ tree ---------------------------------------------------------------------------

def test_rendering_is_byte_identical_across_runs(kb: KnowledgeBase, published: Expansion) -> None:
    first = tree_of(Renderer(kb).render_all(published, published.variants))
    second = tree_of(Renderer(kb).render_all(published, published.variants))
    assert first == second
    for context in Renderer(kb).render_all(published, published.variants):
        assert set(context.files) == expected_files(context), context.variant.key


def expected_files(context: RenderedContext) -> set[str]:
    """Dockerfile, guard, smoke workload, facts script, profile, banner; pip.conf where torch comes from an
    index (not Gaudi: its base has Intel's own torch); an apt key and sources list per repository it COPYs."""
    names = {"Dockerfile", "guard.sh", "smoke.py", "facts.py", "profile.sh", "banner.sh"}
    if context.variant.wheel_index is not None:
        names.add("pip.conf")
    dockerfile = context.files["Dockerfile"].decode()
    return names | {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY apt/")}


def test_write_tree_is_idempotent_and_leaves_unchanged_files_alone(
        renderer: Renderer, published: Expansion, tmp_path: Path) -> None:
    contexts = renderer.render_all(published, published.variants[:4])
    root = tmp_path / "images"
    assert len(write_tree(root, contexts)) == len(tree_of(contexts)) == sum(map(len, map(expected_files, contexts)))
    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert write_tree(root, contexts) == []
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == mtimes
    assert existing_tree(root) == tree_of(contexts)
    assert os.access(root / contexts[0].variant.key / "guard.sh", os.X_OK)


def test_stale_paths_sees_modified_extra_and_missing_files(
        renderer: Renderer, published: Expansion, tmp_path: Path) -> None:
    contexts = renderer.render_all(published, published.variants[:3])
    root = tmp_path / "images"
    write_tree(root, contexts)
    keys = [c.variant.key for c in contexts]
    (root / keys[0] / "Dockerfile").write_text("FROM scratch\n")
    (root / keys[1] / "notes.txt").write_text("extra\n")
    (root / keys[2] / "smoke.py").unlink()
    assert stale_paths(root, contexts) == sorted([f"{keys[0]}/Dockerfile", f"{keys[1]}/notes.txt",
                                                  f"{keys[2]}/smoke.py"])
    write_tree(root, contexts)
    assert stale_paths(root, contexts) == []
    assert not (root / keys[1] / "notes.txt").exists()


def test_write_tree_removes_variants_no_longer_rendered(renderer: Renderer, published: Expansion,
                                                        tmp_path: Path) -> None:
    root = tmp_path / "images"
    write_tree(root, renderer.render_all(published, published.variants[:2]))
    kept = renderer.render_all(published, published.variants[:1])
    write_tree(root, kept)
    assert sorted(p.name for p in (root / published.variants[0].vendor).iterdir()) == [
        published.variants[0].tag]


@pytest.mark.live_data
def test_checked_in_images_match_a_fresh_render() -> None:
    """The live matrix and knowledge base, not the module's frozen `published`: the tree is theirs."""
    kb = load_kb()
    published = expand(load_matrix(REPO / "matrix.yaml"), kb)
    contexts = Renderer(kb).render_all(published, published.variants)
    assert stale_paths(REPO / "images", contexts) == []


def test_build_context_links_the_wheelhouse(renderer: Renderer, kb: KnowledgeBase, tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    (wheelhouse / "ipython-9.18.1-py3-none-any.whl").write_bytes(b"wheel")
    (wheelhouse / "pip-26.3-py3-none-any.whl").write_bytes(b"wheel")
    (wheelhouse / "subdir").mkdir()
    variant = make_variant(kb, *SAMPLE_VARIANTS["2.13.0-cpu-py3.11-debian12"])
    options = RenderOptions(pip_find_links=wheelhouse, without_companions=("torchvision",))
    context: RenderedContext = renderer.context(variant, bare_expansion(), options)
    dest = write_build_context(tmp_path / "ctx", context, wheelhouse)
    assert sorted(p.name for p in dest.iterdir()) == ["Dockerfile", "banner.sh", "facts.py", "guard.sh", "pip.conf",
                                                      "profile.sh", "smoke.py", "wheels"]
    assert sorted(p.name for p in (dest / "wheels").iterdir()) == [
        "ipython-9.18.1-py3-none-any.whl", "pip-26.3-py3-none-any.whl",
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    with pytest.raises(InputError, match="wheelhouse directory not found"):
        write_build_context(tmp_path / "ctx2", context, tmp_path / "absent")


def test_a_template_cannot_reach_python_internals(tmp_path: Path) -> None:
    """The environment is sandboxed: `os.popen` through a global's internals is refused, one line."""
    from accel_images.cli.options import load_expansion
    from accel_images.resources import default_templates
    templates = tmp_path / "templates"
    shutil.copytree(default_templates(), templates)
    marker = tmp_path / "ran"
    cpu = templates / "base.Dockerfile.j2"
    cpu.write_text(cpu.read_text() + "{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}\n")
    expansion = load_expansion(str(Path(__file__).parents[1] / "matrices" / "small.yaml"))
    variant = next(v for v in expansion.variants if v.vendor == "cpu")
    with pytest.raises(InputError) as caught:
        Renderer(load_kb(), templates).context(variant, expansion, RenderOptions())
    assert "template reaches outside its sandbox" in caught.value.one_line()
    assert str(cpu) in caught.value.one_line()
    assert not marker.exists()


# -- what a developer's first minutes need, in every image ----------------------------------------

@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_image_has_what_cpp_extension_load_needs(dockerfiles: Callable[[str], list[tuple[Variant, str]]],
                                                       option_set: str) -> None:
    """ninja, a C++ compiler and the Python headers in the final stage of every variant, Gaudi's too:
    torch.utils.cpp_extension.load() refuses to start without ninja. And nss_wrapper, with which the
    entry point names an arbitrary --user."""
    for variant, dockerfile in dockerfiles(option_set):
        installs = " ".join(rest for word, rest in image_steps(dockerfile, variant.platform)
                            if word == "RUN" and re.search(r"apt-get(?: -o \S+)* install", rest)
                            and "--only-upgrade" not in rest)
        packages = set(re.findall(r"[\w.+-]+", installs))
        assert {"ninja-build", "g++", "libnss-wrapper"} <= packages, variant.key   # the last: guard.sh names --user
        assert any(name.endswith("-dev") and name.startswith("python3") for name in packages), variant.key
        assert set(EVERYDAY_TOOLS) <= packages, (variant.key, set(EVERYDAY_TOOLS) - packages)


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_image_runs_under_tini_has_make_and_greets_an_interactive_shell(
        dockerfiles: Callable[[str], list[tuple[Variant, str]]], option_set: str) -> None:
    """tini as PID 1 (`docker stop` in under 2 s, tests/integration/test_developer_image.py measures it),
    make beside the compiler in the runtime flavor too, and the banner sourced by /etc/bash.bashrc."""
    for variant, dockerfile in dockerfiles(option_set):
        steps = image_steps(dockerfile, variant.platform)
        installs = " ".join(rest for word, rest in steps if word == "RUN" and re.search(r"apt-get\b.* install ", rest))
        assert {"make", "tini"} <= set(re.findall(r"[\w.+-]+", installs)), variant.key
        assert ("ENTRYPOINT", '["/usr/bin/tini", "-s", "-g", "--", "/opt/accel-images/guard.sh"]') in steps, variant.key
        assert any(">> /etc/bash.bashrc" in rest and "/opt/accel-images/banner.sh" in rest for word, rest in steps
                   if word == "RUN"), variant.key


# jupyter/docker-stacks minimal-notebook's "common useful utilities" but nano-tiny, and procps.
EVERYDAY_TOOLS = ("git", "openssh-client", "curl", "less", "vim-tiny", "unzip", "procps", "tzdata")


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_image_lets_git_work_in_a_checkout_another_user_owns(
        dockerfiles: Callable[[str], list[tuple[Variant, str]]], option_set: str) -> None:
    """A bind-mounted checkout belongs to the host's user, not the container's: /etc/gitconfig
    opts out of git's ownership check, as git's safe.directory = * exists for."""
    for variant, dockerfile in dockerfiles(option_set):
        assert "&& printf '[safe]\\n\\tdirectory = *\\n' > /files/etc/gitconfig \\\n" in dockerfile, variant.key
        assert "COPY --from=files /files/ /" in dockerfile, variant.key


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_every_image_with_our_pip_conf_keeps_the_build_backend_for_offline_builds(
        renderer: Renderer, published: Expansion, option_set: str) -> None:
    """`pip install .` without a network: pip.conf's find-links names the directory, and the build
    stage fills it from the same source torch came from."""
    options = OPTION_SETS[option_set]
    for variant in published.variants:
        context = renderer.context(variant, published, options)
        if variant.wheel_index is None:
            assert "pip.conf" not in context.files, variant.key
            continue
        assert f"\nfind-links = {companions.BUILD_BACKENDS}\n" in context.files["pip.conf"].decode(), variant.key
        source = pip_source_args(variant, options)
        download = (f"pip download --no-cache-dir --no-deps --only-binary=:all: --dest /stage{companions.BUILD_BACKENDS}"
                    f" {source} setuptools")
        assert download in context.files["Dockerfile"].decode(), variant.key


def test_the_workload_looks_for_the_build_backend_where_images_keep_it() -> None:
    assert workload.OFFLINE_WHEELS == companions.BUILD_BACKENDS
