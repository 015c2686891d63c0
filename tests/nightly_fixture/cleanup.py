"""Removing what a test left on the local engine: only names under the test's own prefixes."""

from __future__ import annotations

import docker
import docker.errors


def remove_local_names(client: docker.DockerClient, *prefixes: str) -> None:
    """Untag every tag and digest reference starting with one of `prefixes`.

    Images are shared (a test's base is local/debian:bookworm under another name), so this
    removes names, never forcibly, and an image goes only when its last name does. The names come
    from one list call (`images.list` inspects each image afterwards, and fails when another run on
    the shared engine removes one in between).
    """
    for image in client.api.images(all=True):
        for ref in [*(image.get("RepoTags") or []), *(image.get("RepoDigests") or [])]:
            if ref.startswith(prefixes):
                try:
                    client.images.remove(ref)
                except docker.errors.NotFound:
                    pass
