"""Intel Gaudi images: exact Dockerfile text, each assertion citing the reference it follows."""

from __future__ import annotations

from collections.abc import Callable

from test_apt_mirror import STEP_START

STEP = "RUN " + STEP_START
"""How every reproducible step starts (templates/partials/reproducible.j2)."""
GAUDI_2404 = ("gaudi", "1.24.1", "2.11", "3.12", "ubuntu24.04", "devel")
GAUDI_2404_PINNED = ("gaudi", "1.24.0", "2.10", "3.12", "ubuntu24.04", "devel")


def test_base_is_intels_pytorch_installer_and_torch_is_never_reinstalled(dockerfile: Callable[..., str]) -> None:
    # docs.habana.ai Pull_Prebuilt_Containers: vault.habana.ai/gaudi-docker/<ver>/<os>/habanalabs/pytorch-installer-<torch>
    text = dockerfile(*GAUDI_2404_PINNED)
    assert ("\nFROM vault.habana.ai/gaudi-docker/1.24.0/ubuntu24.04/habanalabs/"
            "pytorch-installer-2.10.0:1.24.0-1007\n") in text
    assert "pip install" not in text  # compat-facts §8.20: never reinstall torch from PyPI


def test_habana_logs_are_writable_by_every_user(dockerfile: Callable[..., str]) -> None:
    # opendatahub-io/opendatahub-tests#2301: SIGABRT when /var/log/habana_logs is not writable
    assert "    && mkdir -p /var/log/habana_logs && chmod 1777 /var/log/habana_logs \\\n" in dockerfile(*GAUDI_2404)


def test_every_shell_sources_habanalabs_profile(dockerfile: Callable[..., str]) -> None:
    # HabanaAI/Setup_and_Install dockerfiles/pytorch/Dockerfile.ubuntu: source /etc/profile.d/habanalabs.sh (root only)
    assert ("echo '[ -f /etc/profile.d/habanalabs.sh ] && . /etc/profile.d/habanalabs.sh' >> /etc/bash.bashrc"
            in dockerfile(*GAUDI_2404))


def test_the_user_gets_an_sshd_on_mpi_operators_port(dockerfile: Callable[..., str]) -> None:
    # HabanaAI/Setup_and_Install dockerfiles/base/Dockerfile.ubuntu24.04: `/etc/init.d/ssh start "-p 3022"`
    text = dockerfile(*GAUDI_2404)
    assert STEP + "printf 'Port 3022\\nHostKey %s/.ssh/id_rsa\\nPidFile %s/.sshd.pid\\nStrictModes no\\nUsePAM no\\n'" in text
    assert "/usr/sbin/sshd -f ~/.sshd_config" in text


def test_runtime_variables(dockerfile: Callable[..., str]) -> None:
    # docs.habana.ai Pull_Prebuilt_Containers: -e OMPI_MCA_btl_vader_single_copy_mechanism=none;
    # eager + torch.compile is the default mode (PT_HPU_LAZY_MODE=0, docs.habana.ai Runtime_Flags)
    text = dockerfile(*GAUDI_2404)
    for line in ('OMPI_MCA_btl_vader_single_copy_mechanism="none"', 'PT_HPU_LAZY_MODE="0"'):
        assert f"    {line}" in text, line
    # HabanaAI/Setup_and_Install r1.22.0 (b626de8a): no Dockerfile sets HABANA_VISIBLE_DEVICES (only the
    # utils/*.yaml run configurations do); the run line chooses the devices (device_options)
    assert "HABANA_VISIBLE_DEVICES" not in text


def test_the_guard_knows_the_images_gaudi_software(dockerfile: Callable[..., str]) -> None:
    # the guard compares it with the host driver's release, as recommend does (vendors/gaudi/host.py fit)
    text = dockerfile(*GAUDI_2404)
    assert '    ACCEL_IMAGES_GAUDI="1.24.1"' in text
    assert '    ACCEL_IMAGES_ALTERNATIVES="2.10.0-gaudi1.24.0-py3.12-ubuntu24.04-devel|1.24.0"' in text


def test_a_session_gets_habanas_host_network_and_the_rdma_memlock() -> None:
    # docs.habana.ai Pull_Prebuilt_Containers: docker run ... --cap-add=sys_nice --net=host --ipc=host (V);
    # memlock: RDMA pins registered memory (Red Hat RDMA guide, V); that Gaudi scale-out needs it: I
    from accel_images.host.session import container_flags

    flags = container_flags("gaudi")
    assert flags[-4:] == ["--network", "host", "--ulimit", "memlock=-1"]


def test_every_gaudi_base_has_a_build_tag(kb) -> None:
    # 1.24.1: RELEASE_BUILD_ID ?= 482 in HabanaAI/Setup_and_Install dockerfiles/common.mk @2f5be03a;
    # 1.24.0: 1007 (Intel Gaudi support matrix). No base is a moving :latest any more.
    assert kb.facts("gaudi")["1.24.1"].image_tag == "1.24.1-482"
    assert kb.facts("gaudi")["1.24.0"].image_tag == "1.24.0-1007"
