"""Render docs/report/<scenario>.html from scenarios.py and photograph each page in headless Chromium.

    .venv/bin/python docs/report/screenshots.py [--chromium /usr/bin/chromium]

Writes <scenario>.png beside this file (the pages themselves are written to a temporary directory:
the report is what the tests check, the pictures are what a person looks at).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scenarios import SCENARIOS

from accel_images.report.reports import render_html

HERE = Path(__file__).parent
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
HEIGHTS = {"all-green": 2600, "one-new-failure": 2700, "36-fail-one-cause": 3300}


def shoot(chromium: str, page: Path, png: Path, height: int, profile: Path) -> None:
    subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size=1400,{height}",
                    f"--screenshot={png}", page.as_uri()], check=True, capture_output=True, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        for name, scenario in SCENARIOS.items():
            records, meta = scenario()
            page = Path(temporary) / f"{name}.html"
            page.write_text(render_html(records, meta), encoding="utf-8")
            shoot(args.chromium, page, HERE / f"{name}.png", HEIGHTS[name], Path(temporary) / "profile")
            print(f"wrote {HERE / f'{name}.png'}")


if __name__ == "__main__":
    main()
