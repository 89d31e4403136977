"""MkDocs hook: every relative link in the docs must name a file that exists.

The pages cite the README and the benchmark's results files, which live in
the repository beside ``docs/`` and are not part of the site; MkDocs can only
warn that it does not know them.  So MkDocs' own check of links is relaxed
(``mkdocs.yml``) and this one takes its place: a relative link to a file that
does not exist in the repository fails the build, inside or outside ``docs/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(#[^)\s]*)?\)")
CODE = re.compile(r"^(```|~~~).*?^\1|`[^`\n]*`", re.MULTILINE | re.DOTALL)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    here = Path(page.file.abs_src_path).parent
    missing = [target for target, _ in LINK.findall(CODE.sub("", markdown)) if not (here / target).exists()]
    if missing:
        raise PluginError(f"{page.file.src_path}: links to files that do not exist: {', '.join(missing)}")
    return markdown
