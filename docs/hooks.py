"""MkDocs hooks: the generated reference sections, and the benchmark results published beside the pages.

A page asks for a generated section with a line ``<!-- generated: NAME -->`` (names: ``docs/gen_reference.py``
``GENERATED``). ``benchmarks/results/`` stays where the benchmarks write it; its files are added to the site
under the same path, so a page links them as ``benchmarks/results/scale.md`` and a strict build checks the link.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs.gen_reference import GENERATED  # noqa: E402

MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.M)
PUBLISHED = ("benchmarks/results",)


def on_files(files: Files, config: Any) -> Files:
    for folder in PUBLISHED:
        for path in sorted((ROOT / folder).iterdir()):
            if path.is_file() and not path.name.endswith((".tmp",)) and "-quick." not in path.name:
                uri = f"{folder}/{path.name}"
                files.append(File(uri, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    def generated(match: re.Match[str]) -> str:
        return GENERATED[match.group(1)]()

    return MARKER.sub(generated, markdown)
