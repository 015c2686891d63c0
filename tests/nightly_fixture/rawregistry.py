"""The registry's HTTP API spoken directly, for tests: checks that do not trust accel_images.registry,
and images made from a few bytes (a config blob and a manifest) without any Docker engine."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

import requests

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
CONFIG_TYPES = {DOCKER_MANIFEST: "application/vnd.docker.container.image.v1+json",
                OCI_MANIFEST: "application/vnd.oci.image.config.v1+json"}


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class RawRegistry:
    host: str

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def digest(self, repository: str, tag: str) -> str | None:
        response = requests.head(f"{self.url}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT},
                                 timeout=10)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.headers["Docker-Content-Digest"]

    def manifest(self, repository: str, reference: str) -> bytes:
        response = requests.get(f"{self.url}/v2/{repository}/manifests/{reference}", headers={"Accept": ACCEPT},
                                timeout=10)
        response.raise_for_status()
        return response.content

    def tags(self, repository: str) -> list[str]:
        response = requests.get(f"{self.url}/v2/{repository}/tags/list", timeout=10)
        if response.status_code == 404:
            return []
        response.raise_for_status()
        return sorted(response.json().get("tags") or [])

    def labels(self, repository: str, tag: str) -> dict[str, str]:
        manifest = requests.get(f"{self.url}/v2/{repository}/manifests/{tag}", headers={"Accept": DOCKER_MANIFEST},
                                timeout=10).json()
        config = requests.get(f"{self.url}/v2/{repository}/blobs/{manifest['config']['digest']}", timeout=10).json()
        return config["config"].get("Labels") or {}

    def upload_blob(self, repository: str, data: bytes) -> str:
        digest = sha256(data)
        started = requests.post(f"{self.url}/v2/{repository}/blobs/uploads/", timeout=10)
        started.raise_for_status()
        location = started.headers["Location"]
        location = location if location.startswith("http") else self.url + location
        joiner = "&" if "?" in location else "?"
        done = requests.put(f"{location}{joiner}digest={digest}", data=data, timeout=10,
                            headers={"Content-Type": "application/octet-stream"})
        done.raise_for_status()
        return digest

    def put_manifest(self, repository: str, reference: str, manifest: Mapping[str, Any], media_type: str) -> str:
        body = json.dumps(manifest).encode()
        response = requests.put(f"{self.url}/v2/{repository}/manifests/{reference}", data=body, timeout=10,
                                headers={"Content-Type": media_type})
        response.raise_for_status()
        return response.headers.get("Docker-Content-Digest") or sha256(body)

    def push_config_image(self, repository: str, tag: str, labels: Mapping[str, str], *,
                          created: str = "2026-01-02T03:04:05.123456789Z", architecture: str = "amd64",
                          media_type: str = DOCKER_MANIFEST) -> str:
        """An image with no layers, only a config carrying `labels`; its manifest digest."""
        config = json.dumps({"architecture": architecture, "os": "linux", "created": created,
                             "rootfs": {"type": "layers", "diff_ids": []},
                             "config": {"Labels": dict(labels)}}).encode()
        config_digest = self.upload_blob(repository, config)
        manifest = {"schemaVersion": 2, "mediaType": media_type, "layers": [],
                    "config": {"mediaType": CONFIG_TYPES[media_type], "size": len(config), "digest": config_digest}}
        return self.put_manifest(repository, tag, manifest, media_type)

    def delete_repository(self, repository: str) -> None:
        """Remove every manifest of a test repository (blobs stay until the registry's GC)."""
        for tag in self.tags(repository):
            digest = self.digest(repository, tag)
            if digest:
                requests.delete(f"{self.url}/v2/{repository}/manifests/{digest}", timeout=10)
