"""One short command in a fresh container, through the engine wrapper the smoke test uses.

The SDK's `containers.run(..., remove=True)` removes the container before it reads the log
stream it opened, and for a command that exits at once that stream can end empty
(docker/docker-py#2427, open): a test then fails on output the command did print.
accel_images.builder.engine.Engine.run reads the logs of the exited container before removing it, so the
tests read images through it too.
"""

from __future__ import annotations

from typing import Any

import docker

from accel_images.builder.engine import Engine
from conftest import TEST_LABEL, TEST_RUN

WAIT_S = 300


def output(client: docker.DockerClient, image: str, command: list[str], *, stderr: bool = False,
           **options: Any) -> str:
    """stdout of `command` in `image` (after its stderr, when asked); any other end fails the test.

    `options` are `containers.create` keyword arguments (user, environment, volumes, ...); the
    container carries the label conftest's leak check looks for.
    """
    result = Engine(client, client.api.base_url).run(image, command, options=options, timeout_s=WAIT_S,
                                                     labels={TEST_LABEL: TEST_RUN})
    assert result.exit_code == 0 and not result.timed_out, \
        f"{command} in {image}: exit {result.exit_code}, timed out {result.timed_out}: {result.stderr}"
    return result.stderr + result.stdout if stderr else result.stdout


def run_result(client: docker.DockerClient, image: str, command: list[str], **options: Any) -> str:
    """stderr and stdout of `command` in `image`, whatever its exit code (a probe that is meant to fail)."""
    result = Engine(client, client.api.base_url).run(image, command, options=options, timeout_s=WAIT_S,
                                                     labels={TEST_LABEL: TEST_RUN})
    assert not result.timed_out, f"{command} in {image} timed out"
    return result.stderr + result.stdout
