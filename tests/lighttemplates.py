"""Light templates for tests that build an image without torch.

Every real template ends with the facts step (templates/partials/common.j2 finish()), and every
build checks the image's facts against the knowledge base before anything else runs it. A light
image has no torch to ask, so its template ends with the stand-in the benchmarks use
(benchmarks/templates/partials/standin_facts.j2): the facts an honest image's torch would write.
"""

from __future__ import annotations

import shutil
from pathlib import Path

STANDIN = Path(__file__).resolve().parents[1] / "benchmarks" / "templates" / "partials" / "standin_facts.j2"
FACTS_STEP = '{% import "partials/standin_facts.j2" as standin with context %}\nRUN {{ standin.write() }}\n'


def light_templates(root: Path, cpu_template: str) -> Path:
    """A templates directory under `root` whose CPU template is `cpu_template` followed by the facts step."""
    (root / "vendors").mkdir(parents=True)
    (root / "partials").mkdir()
    shutil.copyfile(STANDIN, root / "partials" / "standin_facts.j2")
    (root / "vendors" / "cpu.Dockerfile.j2").write_text(cpu_template.rstrip("\n") + "\n" + FACTS_STEP)
    return root
