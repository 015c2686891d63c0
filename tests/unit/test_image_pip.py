"""pip inside the image follows the build's mirrors, and IPython comes from where the build may fetch it.

An image built with `--pip-index-url` or a wheelhouse pointed pip at pypi.org all the same
(`extra-index-url = https://pypi.org/simple`): in the air-gapped and mirrored sites the README
targets, every later `pip install` waited on an index out of reach. The image's /etc/pip.conf now
names what the build used: torch's index (or its mirror), the package index the build was given,
or, from a wheelhouse, no index at all. IPython is installed in a pip call of its own, from the
package index or the wheelhouse, never as an extra index beside torch's.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from accel_images.errors import InputError
from accel_images.kb.compat import load_kb
from accel_images.plan.matrix import User
from accel_images.plan.variants import Expansion, make_variant
from accel_images.render.contexts import RenderedContext, Renderer, RenderOptions

MIRROR = "http://127.0.0.1:9/whl/{index}"
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
IPYTHON_WHEEL = "ipython-9.18.1-py3-none-any.whl"
PIP_WHEEL = "pip-26.3-py3-none-any.whl"


def context(options: RenderOptions) -> RenderedContext:
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    return Renderer(kb).context(variant, Expansion((variant,), (), "accel-images/pytorch", User("dev", 1000, 1000)),
                                options)


def pip_conf(rendered: RenderedContext) -> dict[str, str]:
    parser = configparser.ConfigParser()
    parser.read_string(rendered.files["pip.conf"].decode())
    return dict(parser["global"])


def ipython_step(rendered: RenderedContext) -> str:
    return next(line.strip() for line in rendered.files["Dockerfile"].decode().splitlines()
                if "pip install" in line and "ipython" in line)


def wheelhouse(tmp_path: Path, *wheels: str) -> Path:
    for wheel in wheels:
        (tmp_path / wheel).write_bytes(b"wheel")
    return tmp_path


def test_upstream_keeps_torchs_index_first_and_the_package_index_after_it() -> None:
    rendered = context(RenderOptions())
    assert pip_conf(rendered) == {"index-url": "https://download.pytorch.org/whl/cpu",
                                  "extra-index-url": "https://pypi.org/simple", "find-links": "/opt/accel-images/wheels"}
    assert ipython_step(rendered) == "&& /opt/venv/bin/pip install --no-cache-dir --upgrade --index-url https://pypi.org/simple ipython pip \\"


def test_a_mirror_of_torchs_index_leaves_pypi_out_of_the_image() -> None:
    rendered = context(RenderOptions(pip_index_url=MIRROR))
    assert pip_conf(rendered) == {"index-url": "http://127.0.0.1:9/whl/cpu", "find-links": "/opt/accel-images/wheels"}
    assert b"pypi.org" not in rendered.files["pip.conf"]
    assert "--index-url http://127.0.0.1:9/whl/cpu ipython pip" in ipython_step(rendered)
    assert b"PIP_EXTRA_INDEX_URL" in rendered.files["pip.conf"]  # how to add one at run time, said in the file


def test_a_package_index_mirror_is_the_images_extra_index_and_ipythons_source() -> None:
    rendered = context(RenderOptions(pip_index_url=MIRROR, pip_extra_index_url="https://pypi.example.cn/simple"))
    assert pip_conf(rendered)["extra-index-url"] == "https://pypi.example.cn/simple"
    assert "--index-url https://pypi.example.cn/simple ipython pip" in ipython_step(rendered)


def test_a_wheelhouse_image_names_no_index(tmp_path: Path) -> None:
    rendered = context(RenderOptions(pip_find_links=wheelhouse(tmp_path, TORCH_WHEEL, IPYTHON_WHEEL, PIP_WHEEL),
                                     without_companions=("torchvision",)))
    assert pip_conf(rendered) == {"no-index": "true", "find-links": "/opt/accel-images/wheels"}
    assert "--no-index --find-links /tmp/wheels ipython pip" in ipython_step(rendered)
    assert b"PIP_NO_INDEX=0 -e PIP_INDEX_URL=" in rendered.files["pip.conf"]


def test_credentials_in_the_package_index_url_are_refused() -> None:
    with pytest.raises(InputError, match="credentials") as caught:
        RenderOptions(pip_extra_index_url="https://user:token@pypi.example/simple")
    assert caught.value.field == "--pip-extra-index-url"


def test_a_wheelhouse_without_the_torch_asked_for_is_found_at_render(tmp_path: Path) -> None:
    """Not at docker step 7, minutes in: before any build step, with what the wheelhouse has."""
    other = wheelhouse(tmp_path, "torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl", IPYTHON_WHEEL,
                       PIP_WHEEL)
    with pytest.raises(InputError) as caught:
        context(RenderOptions(pip_find_links=other))
    assert caught.value.one_line().startswith(
        f"--pip-find-links: wheelhouse {other} has no torch 2.13.0+cpu for Python 3.11 (it has 2.14.1+cpu for cp312)")


def test_an_arm64_build_with_an_x86_64_only_wheelhouse_is_refused_at_render_naming_what_it_holds(
        tmp_path: Path) -> None:
    """Not minutes into an emulated build with pip's "(it has none)": the platform's wheels are checked before any
    step, and the refusal names what the wheelhouse holds and for which machine."""
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime", platform="linux/arm64")
    expansion = Expansion((variant,), (), "accel-images/pytorch", User("dev", 1000, 1000))
    x86_only = wheelhouse(tmp_path, TORCH_WHEEL, IPYTHON_WHEEL, PIP_WHEEL)
    options = RenderOptions(pip_find_links=x86_only, without_companions=("torchvision",))
    with pytest.raises(InputError) as caught:
        Renderer(kb).context(variant, expansion, options)
    assert caught.value.one_line().startswith(
        f"--pip-find-links: wheelhouse {x86_only} has no torch 2.13.0+cpu for Python 3.11 on linux/arm64 (it has"
        " 2.13.0+cpu for cp311 on manylinux_2_28_x86_64)")
    assert "\n" not in caught.value.one_line()
    wheelhouse(tmp_path, TORCH_WHEEL.replace("x86_64", "aarch64"))
    assert Renderer(kb).context(variant, expansion, options).variant.platform == "linux/arm64"


def test_a_wheelhouse_without_ipython_is_found_at_render(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="has no wheel of ipython or pip, which every image installs"):
        context(RenderOptions(pip_find_links=wheelhouse(tmp_path, TORCH_WHEEL)))


def test_a_wheelhouse_without_pip_is_found_at_render_since_every_image_upgrades_its_pip(tmp_path: Path) -> None:
    """The venv's pip is the one the OS bundles (Debian 12: 23.0.1) unless the build upgrades it from the wheelhouse."""
    with pytest.raises(InputError, match="has no wheel of pip, which every image installs") as caught:
        context(RenderOptions(pip_find_links=wheelhouse(tmp_path, TORCH_WHEEL, IPYTHON_WHEEL),
                              without_companions=("torchvision",)))
    assert "pip download pip" in (caught.value.hint or "")


def test_the_context_says_which_tools_its_pip_installs_so_a_host_fetch_gets_them_too() -> None:
    """The run's host fetch (accel_images.builder.wheels) asks the package index for IPython only where the
    Dockerfile installs it: a template of its own that does not (a plug-in vendor's) fetches nothing more."""
    from accel_images.render.contexts import installed_tools
    assert context(RenderOptions()).tools == ("ipython", "pip")
    assert installed_tools("RUN /opt/venv/bin/pip install --no-index torch numpy\n") == ()   # pip the command
    assert installed_tools("RUN pip install torch && pip install ipython pip\n") == ("ipython", "pip")
    assert installed_tools("RUN pip install --no-index torch numpy\n") == ()
    assert installed_tools("RUN pip install \\\n    --index-url https://pypi.org/simple ipython\n") == ("ipython",)
    assert installed_tools("RUN pip install ipython-genutils\n") == ()
