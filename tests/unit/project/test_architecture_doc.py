"""docs/ARCHITECTURE.md stays a map a newcomer can read, and stays true to the tree.

The map and its detail pages (docs/architecture/*.md) are checked for:

- readability: no line over ``MAX_LINE`` characters, no table cell over ``MAX_CELL`` (long
  detail belongs in a detail page, as short statements, not in one cell);
- the files they name: every repository path in backticks (``heron_py/common/wire.py``,
  ``tests/unit/connectors/*/test_faults.py``, a folder such as ``heron_py/connectors/``) must
  exist, so a renamed or removed file fails here until the map follows. A path with a placeholder
  (``topologies/NAME/``, ``tests/unit/<daemon>/``) is a pattern, not a file, and is skipped; so is a
  bare one-segment folder (``src/``, ``run/``: a user's or a container's, not the repository's);
- its links: every detail page is reachable from the map, and every page is in the site's nav;
- the "Where does my change go" table: a row for each kind of change it promises.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAP = ROOT / "docs" / "ARCHITECTURE.md"
DETAIL = ROOT / "docs" / "architecture"
MAX_LINE = 300
MAX_CELL = 600
# what a repository file may end with, as the map names it
EXTENSIONS = ("py", "pyx", "pyi", "proto", "md", "sh", "json", "yml", "yaml", "toml", "txt", "js", "cfg", "ini")
_PATH = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*-]+)*/?$")
_SPAN = re.compile(r"`([^`\n]+)`")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
# words that stand for a value in a path (topologies/NAME/container-K/, ROOT/TOPOLOGY/ID/TASK)
PLACEHOLDERS = frozenset({"NAME", "K", "N", "ID", "TASK", "TOPOLOGY", "ROOT", "PREFIX", "CLUSTER"})
ROWS = ("a new message type", "a new config key", "a new connector", "a new metric", "a new daemon behaviour",
        "a new CLI verb", "a new scheduler", "a new checkpoint storage")


def _pages() -> list[Path]:
    return [MAP, *sorted(DETAIL.glob("*.md"))]


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _outside_code_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def repository_paths(text: str) -> list[str]:
    """The repository paths a page names in backticks (each word of a span that looks like one)."""
    found = []
    for _, line in _outside_code_blocks(text):
        for span in _SPAN.findall(line):
            for word in span.split():
                word = word.rstrip(",;:")
                if "/" not in word or not _PATH.match(word):
                    continue
                segments = word.rstrip("/").split("/")
                if any(p in PLACEHOLDERS for s in segments for p in re.split(r"[.-]", s)):
                    continue
                if word.endswith("/"):
                    if len(segments) < 2:
                        continue  # src/, run/: a user's or a container's folder
                elif word.rsplit(".", 1)[-1] not in EXTENSIONS:
                    continue  # a config key with a slash (cpumap/rammap), a label (heron-py/topology)
                found.append(word)
    return found


def _exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path.rstrip("/")))
    target = ROOT / path
    return target.is_dir() if path.endswith("/") else target.is_file()


def test_repository_paths_finds_files_and_folders_and_skips_patterns() -> None:
    text = ("`heron_py/common/wire.py`, `heron_py/cli/submit.py load_topology_file`, `heron_py/connectors/`, "
            "`topologies/NAME/`, `tests/unit/<daemon>/`, `src/`, `topology.component.cpumap/rammap`, "
            "`tests/unit/connectors/*/test_faults.py`\n```\nnot/in/a/block.py\n```\n")
    assert repository_paths(text) == ["heron_py/common/wire.py", "heron_py/cli/submit.py", "heron_py/connectors/",
                                      "tests/unit/connectors/*/test_faults.py"]
    assert not _exists("heron_py/common/no_such_module.py")


def test_no_line_is_longer_than_the_limit() -> None:
    long = [f"{_rel(p)}:{n}: {len(line)} characters" for p in _pages()
            for n, line in _outside_code_blocks(p.read_text(encoding="utf-8")) if len(line) > MAX_LINE]
    assert long == [], f"lines over {MAX_LINE} characters: wrap them, or move the detail to a page"


def test_no_table_cell_is_longer_than_the_limit() -> None:
    long = []
    for page in _pages():
        for n, line in _outside_code_blocks(page.read_text(encoding="utf-8")):
            if line.lstrip().startswith("|"):
                for cell in _CELL_SPLIT.split(line.strip().strip("|")):
                    if len(cell.strip()) > MAX_CELL:
                        long.append(f"{_rel(page)}:{n}: a cell of {len(cell.strip())} characters")
    assert long == [], f"table cells over {MAX_CELL} characters: say it short and link the detail"


def test_every_path_named_in_backticks_exists() -> None:
    missing = [f"{_rel(p)}: {path}" for p in _pages() for path in repository_paths(p.read_text(encoding="utf-8"))
               if not _exists(path)]
    assert missing == [], "the architecture pages name files that are not in the repository (renamed? moved?)"


def test_every_detail_page_is_linked_from_the_map_and_in_the_nav() -> None:
    text = MAP.read_text(encoding="utf-8")
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(DETAIL.glob("*.md"))
    assert pages, "docs/architecture/ holds the map's detail pages"
    for page in pages:
        assert f"(architecture/{page.name}" in text, f"ARCHITECTURE.md does not link {page.name}"
        assert f"architecture/{page.name}" in nav, f"mkdocs.yml's nav does not list architecture/{page.name}"


def test_the_change_table_has_a_row_for_each_kind_of_change() -> None:
    text = MAP.read_text(encoding="utf-8")
    assert "## 5. Where does my change go" in text
    rows = {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| a new ")}
    assert set(ROWS) <= rows, f"rows missing from 'Where does my change go': {sorted(set(ROWS) - rows)}"
