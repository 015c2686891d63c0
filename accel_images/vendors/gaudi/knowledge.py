"""What the knowledge base says of Intel Gaudi: the releases of data/vendors/gaudi.yaml (`GaudiRelease`:
the torch each bundles, its OS and Python) and what follows from them (which combinations work, how a
variant resolves to Intel's pytorch-installer image, whose own torch build is never replaced).

References:
- releases, bundled torch, OS/Python: https://docs.habana.ai/en/latest/Support_Matrix/Support_Matrix.html
- images: https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping

from accel_images.model.knowledge import Combo, Resolution, minor_of, version_matches
from accel_images.vendors.base import VendorBase
from accel_images.versions import sort_versions

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge, TorchRelease


@dataclass(frozen=True)
class GaudiRelease:
    version: str
    torch: str
    os_python: Mapping[str, str]
    image_tag: str = "latest"


class GaudiKnowledge(VendorBase):
    """The Intel Gaudi vendor's knowledge layer: its releases, the reasons a combination fails, resolution."""

    def load_facts(self, raw: Mapping[str, Any]) -> dict[str, GaudiRelease]:
        return {str(v): GaudiRelease(str(v), str(g["torch"]), {str(k): str(p) for k, p in g["os"].items()},
                                     str(g.get("image_tag", "latest")))
                for v, g in raw["releases"].items()}

    def releases(self, kb: Knowledge) -> dict[str, GaudiRelease]:
        releases: dict[str, GaudiRelease] = self.section(kb).facts
        return releases

    def stacks(self, kb: Knowledge, torch: str) -> tuple[str, ...]:
        """Releases bundling this torch: '2.4' matches any 2.4.x, '2.4.1' only itself."""
        public = torch.split("+", 1)[0]
        by_minor = public == minor_of(public)
        return tuple(v for v, g in self.releases(kb).items()
                     if g.torch == public or (by_minor and minor_of(g.torch) == public))

    def torch_for_stack(self, kb: Knowledge, stack: str) -> list[str]:
        return [g.torch for v, g in self.releases(kb).items() if version_matches(stack, v)]

    def exact_stack(self, kb: Knowledge, stack: str | None, torch: str) -> str | None:
        return stack

    def stack_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        if combo.stack is None:
            return []
        stack, releases = combo.stack, self.releases(kb)
        matches = [v for v in releases if version_matches(stack, v)]
        if not matches:
            return [f"Intel Gaudi {stack} is unknown (known: {', '.join(releases)})"]
        bundled = {releases[v].torch for v in matches}
        wanted = combo.torch.split("+")[0]
        if any(b == wanted or minor_of(b) == wanted for b in bundled):
            return []
        fits = ", ".join(self.stacks(kb, combo.torch)) or "none"
        return [f"Intel Gaudi {stack} bundles torch {', '.join(sorted(bundled))}, not {wanted}"
                f" (Gaudi releases with torch {wanted}: {fits})"]

    def python_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease,
                       experimental: bool) -> list[str]:
        """Python is fixed by the image's OS: checked with the OS when there is one."""
        if combo.os is not None or combo.stack is None:
            return []
        pythons = {p for v, g in self.releases(kb).items() if version_matches(combo.stack, v)
                   for p in g.os_python.values()}
        if combo.python in pythons:
            return []
        return [f"Intel Gaudi {combo.stack} images ship Python {', '.join(sort_versions(pythons))}, not {combo.python}"]

    def os_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        base = self.os_base_reasons(kb, combo, row)
        if base or combo.stack is None:
            return base
        release = self.releases(kb).get(combo.stack)
        if release is None:
            return []
        if combo.os not in release.os_python:
            return [f"Intel Gaudi {combo.stack} has no image for {combo.os} (it has: {', '.join(release.os_python)})"]
        fixed = release.os_python[combo.os or ""]
        if combo.python and combo.python != fixed:
            return [f"Intel Gaudi {combo.stack} on {combo.os} ships Python {fixed}, not {combo.python}"]
        return []

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        release = self.releases(kb)[combo.stack or ""]
        base = (f"vault.habana.ai/gaudi-docker/{release.version}/{combo.os}/habanalabs/"
                f"pytorch-installer-{release.torch}:{release.image_tag}")
        return Resolution(torch=release.torch, stack=release.version, base_image=base)

    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]:
        return {"gaudi": [v for v in self.releases(kb) if version_matches(stack or "", v)]} if stack else {}
