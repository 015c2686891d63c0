"""The `accel-images` command: a thin layer over the pipeline stages.

One module per command group (compat, host, kb, listing, render, build, nightly, fanout, session, verify), each
importing its shared options from `options` and never another command module or this package. The group
below names every command with its one-line help and imports a command's module only when that
command runs (group.LazyGroup), so `accel-images list` or `compat` never loads the docker SDK,
requests or the builder. Expected failures (AccelError) become one line on stderr and their exit
code (options.expected_failures); nothing else is caught here.
"""

from __future__ import annotations

import click

from accel_images.cli.group import LazyCommand, LazyGroup
from accel_images.cli.options import handle_sigterm

COMMANDS = (
    LazyCommand("bake", "accel_images.cli.fanout:bake_command",
                "Write a docker-bake.json with one target per variant, for `docker buildx bake`."),
    LazyCommand("build", "accel_images.cli.build:build_command",
                "Render, build and smoke-test the chosen variants; `--vendor auto` picks this host's vendor."),
    LazyCommand("catalogue", "accel_images.cli.session:catalogue_command",
                "List what a registry publishes: each image's labels, its smoke result and where it passed."),
    LazyCommand("ci-matrix", "accel_images.cli.fanout:ci_matrix_command",
                "Print the variants as a GitHub Actions job matrix: JSON on one line, for `fromJSON`."),
    LazyCommand("compat", "accel_images.cli.compat:compat_command",
                "Check a version combination: `compat torch==2.4.1 cuda==12.4 [python==3.11]`."),
    LazyCommand("devcontainer", "accel_images.cli.session:devcontainer_command",
                "Write .devcontainer/devcontainer.json for IMAGE, or for the image `recommend` would choose."),
    LazyCommand("host", "accel_images.cli.host:host_group",
                "Describe this host as `--host-json` reads it, to judge images for it from anywhere."),
    LazyCommand("kb", "accel_images.cli.kb:kb_group",
                "Compare the knowledge base with the package index, the wheel indexes and the registries."),
    LazyCommand("list", "accel_images.cli.listing:list_command", "Show the variants the matrix expands to."),
    LazyCommand("nightly", "accel_images.cli.nightly:nightly_command",
                "Rebuild every variant whose inputs changed, smoke-test it, and promote only what passed."),
    LazyCommand("pull", "accel_images.cli.fanout:pull_command",
                "Like recommend, then pull the image and print the line that runs it (`docker run`, or `podman run`)."),
    LazyCommand("recommend", "accel_images.cli.fanout:recommend_command",
                "Pick the newest image that fits this host and print how to run it (`docker run`, or --engine's"
                " form)."),
    LazyCommand("render", "accel_images.cli.render:render_command",
                "Write images/<vendor>/<tag>/ (Dockerfile and the files it copies) for every variant."),
    LazyCommand("run", "accel_images.cli.session:run_command",
                "Start a development container: device options, host UID:GID, this directory at /workspace."),
    LazyCommand("smoke", "accel_images.cli.build:smoke_command",
                "Run the smoke workload in IMAGE and check it against what the image's labels promise."),
    LazyCommand("verify", "accel_images.cli.verify:verify_command",
                "Check that IMAGE's digest has a provenance signed by --key, about that digest, recording a passed"
                " smoke test."),
)
"""Every command: its name, where it is defined, and the summary `--help` lists (tests keep them in step)."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accel-images")
def main() -> None:
    """PyTorch development images for NVIDIA CUDA, AMD ROCm, Intel XPU, Intel Gaudi and CPU.

    \b
    Examples:
      accel-images recommend
      accel-images list --vendor cuda
    """
    handle_sigterm()


__all__ = ["COMMANDS", "main"]
