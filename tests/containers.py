"""One short command in a fresh container, its output read only after it exits.

The SDK's `containers.run(..., remove=True)` opens a following log stream, waits, removes the
container and only then reads the stream; when the command exits at once the stream can end
empty, and a test then fails on output the command did print (docker/docker-py#2427, open).
This helper reads the logs of the exited container before removing it, the order
accel_images.engine.Engine.run uses.
"""

from __future__ import annotations

from typing import Any

import docker
import docker.errors
from conftest import TEST_LABEL

WAIT_S = 300


def output(client: docker.DockerClient, image: str, command: list[str], *, stderr: bool = False,
           **options: Any) -> bytes:
    """stdout (and stderr when asked) of `command` in `image`; a non-zero exit raises ContainerError.

    `options` are `containers.create` keyword arguments (user, environment, volumes, ...).
    """
    labels = {TEST_LABEL: "1", **options.pop("labels", {})}  # conftest removes and fails a leaked one
    container = client.containers.create(image, command, labels=labels, **options)
    try:
        container.start()
        status = container.wait(timeout=WAIT_S)["StatusCode"]
        if status != 0:
            raise docker.errors.ContainerError(container, status, command, image,
                                               container.logs(stdout=False, stderr=True).decode(errors="replace"))
        return bytes(container.logs(stdout=True, stderr=stderr))
    finally:
        container.remove(force=True)
