"""The package list of one image, as a page a person reads: its SBOM's inventory, rendered.

The CycloneDX SBOM (accel_images.supply.sbom) is for tools; the developer about to pull an image
asks "which numpy, which libc, is ffmpeg in there?", as jupyter/docker-stacks answers with a
package list published per tag. This page is that list, written beside the SBOM in the run's
report directory (`attestations/<tag>/packages.html`) and linked from the report's grid: the
Python distributions first (torch's build, the vendor runtime wheels), then the OS packages.
Static, autoescaped, no script or external resource, like the report itself.
"""

from __future__ import annotations

import functools

import jinja2

from accel_images.supply.sbom import Inventory, Subject

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Packages of {{ subject.repository }}:{{ subject.tag }}</title>
<style>
body { margin: 0; padding: 24px 32px; font: 14px/1.45 system-ui, sans-serif; color: #1f2328; background: #f6f8fa; }
code, td { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
table { border-collapse: collapse; background: #fff; border: 1px solid #d0d7de; margin: 8px 0 24px; }
th, td { border-bottom: 1px solid #d0d7de; padding: 3px 10px; text-align: left; }
.muted { color: #59636e; }
</style>
</head>
<body>
<h1>Packages of <code>{{ subject.repository }}:{{ subject.tag }}</code></h1>
<p class="muted">Image <code>{{ subject.digest }}</code> · {{ inventory.os_id }} {{ inventory.os_version }} ·
Python {{ inventory.python_version }} · read inside the image; the same list is its CycloneDX SBOM
(<a href="sbom.cdx.json">sbom.cdx.json</a>).</p>
{% for title, packages, arch in sections %}
<h2>{{ title }} ({{ packages | length }})</h2>
<table><thead><tr><th>name</th><th>version</th>{% if arch %}<th>architecture</th>{% endif %}</tr></thead>
<tbody>
{% for package in packages %}
<tr><td>{{ package.name }}</td><td>{{ package.version }}</td>{% if arch %}<td>{{ package.arch }}</td>{% endif %}</tr>
{% endfor %}
</tbody></table>
{% endfor %}
</body>
</html>
"""


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                     lstrip_blocks=True)
    return environment.from_string(PAGE)


def package_page(inventory: Inventory, subject: Subject) -> str:
    """The page: Python distributions, then OS packages, each sorted by name."""
    python = [p for p in inventory.packages if p.kind == "pypi"]
    system = [p for p in inventory.packages if p.kind == "deb"]
    sections = [("Python packages", python, False), ("OS packages (dpkg)", system, True)]
    return _template().render(inventory=inventory, subject=subject, sections=sections)
