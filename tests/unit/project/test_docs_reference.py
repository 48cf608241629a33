"""The docs' reference pages are generated from the code (scripts/gen_reference.py): the
committed pages must equal a fresh generation, so a change to the config table, the CLI, the
metrics, the HTTP routes or the wire protocol fails here until the pages are regenerated."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_committed_pages_equal_a_fresh_generation() -> None:
    gen = _gen()
    pages = gen.render_all(ROOT)
    assert sorted(pages) == ["docs/reference/api.md", "docs/reference/cli.md", "docs/reference/config.md",
                             "docs/reference/http-api.md", "docs/reference/metrics.md",
                             "docs/reference/wire-protocol.md"]
    assert gen.stale(pages, ROOT) == []


def test_pages_hold_what_the_code_declares() -> None:
    from heron_py.common.config import KEYS
    from heron_py.common.framing import MsgType

    pages = _gen().render_all(ROOT)
    for name in KEYS:
        assert f"| `{name}` |" in pages["docs/reference/config.md"]
    for t in MsgType:
        assert f"| `{t.name}` | {int(t)} |" in pages["docs/reference/wire-protocol.md"]
    assert "| `__emit-count/<stream>` | `heron_emit_count_total` | counter | instance |" in \
        pages["docs/reference/metrics.md"]
    assert ("| GET | `/topologies/metrics` | `component`, `metricname`, `interval` | read or admin, off loopback | "
            "`topology_master/http_api.py` |") in pages["docs/reference/http-api.md"]
    assert "| POST | `/topologies/actions/ACTION` |  | admin, everywhere | `topology_master/ui_api.py` |" \
        in pages["docs/reference/http-api.md"]
    assert "## submit\n" in pages["docs/reference/cli.md"]


def test_check_names_a_stale_page_and_exits_1(tmp_path: Path) -> None:
    gen = _gen()
    pages = gen.render_all(ROOT)
    for rel, text in pages.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert gen.stale(pages, tmp_path) == []
    # the config table gained a key nobody documented
    (tmp_path / "docs/reference/config.md").write_text(pages["docs/reference/config.md"].replace(
        "| `topology.acking` |", "| `topology.acking.old` |"))
    (tmp_path / "docs/reference/cli.md").unlink()
    assert gen.stale(pages, tmp_path) == [
        "docs/reference/config.md: differs from the code; run python scripts/gen_reference.py and commit it",
        "docs/reference/cli.md: missing; run python scripts/gen_reference.py and commit it"]


def test_check_mode_of_the_script() -> None:
    # the script as CI and scripts/docs.sh run it: exit 0 on the committed tree
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_starts_with_the_two_commands_and_stays_short() -> None:
    text = _readme()
    assert len(text.encode()) <= 8192, f"README.md is {len(text.encode())} bytes; expected at most 8192"
    blocks = text.split("```\n")
    first, second = blocks[1].splitlines(), blocks[3].splitlines()
    assert first[0].startswith("python3 -m venv ")
    assert " && pip install . && heron-py submit local examples/quickstart/word_count.py" in first[0]
    # the root-only test command in a block of its own: pasting the first block never runs it
    assert len(first) == 1 and second[0].startswith("bash scripts/test.sh ")
    assert text.index("```") < 200  # the two commands come first


def test_readme_topology_is_the_quickstart_example_verbatim() -> None:
    code = _readme().split("```python\n", 1)[1].split("```\n", 1)[0]
    example = (ROOT / "examples" / "quickstart" / "word_count.py").read_text(encoding="utf-8")
    assert example.endswith(code), "README's topology differs from examples/quickstart/word_count.py"
    assert "bench" not in example and "wc_common" not in example  # the first example stands alone


def test_readme_links_reach_files() -> None:
    import re

    missing = [link for link in re.findall(r"\]\(([^)#]+)\)", _readme())
               if "://" not in link and not (ROOT / link).exists()]
    assert missing == []
