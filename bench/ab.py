"""A/B of one engine switch in one run: our word count (acking off) with a topology config
property set to A and to B, alternating, next to the plain loop; prints each ratio. With
``--latency RATE`` it compares end-to-end latency at RATE sentences/s instead.

    python bench/ab.py heron_py.instance.specialized.emit false true [--reps 2] [--sentences N]
    python bench/ab.py heron_py.instance.flush.when.idle false true --latency 10000
    python bench/ab.py --rev 17466cd [--reps 3]     # A = the engine at a git revision, B = this tree
    python bench/ab.py --rev fade6e1 --rev-b 911843e   # A and B both revisions: one change alone
    python bench/ab.py --rev 17466cd --program streamlet_wc.py   # the same, the Streamlet word count
    python bench/ab.py --rev HEAD --program streamlet_wc.py --program-arg keyed   # its count_by_key shape
    python bench/ab.py heron_py.instance.batch.size 1024 4096 --program streamlet_wc.py --program-arg consume
    python bench/ab.py --no-mac [--acking]          # A = this tree with the frame MAC a no-op, B = this tree
    python bench/ab.py KEY1,KEY2 A1,A2 B1,B2        # several properties switched together

Each run also prints the peak PSS of the topology's processes, and every A/B the CPU the
topology's processes used per word between 10 % and 90 % of the run's words (all of them
summed, start-up and tail left out): on a shared 2-core machine the wall time of one run
spreads by 10 % and more, the CPU it costs much less, so a change of a few per cent shows there
first.

With ``--rev`` the revision is checked out in a temporary git worktree with a venv of its own
(its packages are this venv's, only heron-py itself differs), and A runs with that
interpreter: the CLI, the executors and every daemon then run the old code. A revision that
has the compiled hot path (heron_py/hotpath.py) gets its modules compiled in its worktree
first, so both sides run as installed.

With ``--no-mac`` A runs this tree under a bench-only interpreter (a venv beside this one) whose
startup replaces ``FrameMac.tag`` and ``FrameMac.check`` (heron_py/common/frameauth.py) with
no-ops in every process of the topology: the cost of authenticating every frame, alone. Nothing
in the engine knows of it; a topology run that way has no frame integrity.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from run import hot_path, latency, ours, plain  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent


def checkout_python(rev: str) -> str:
    """An interpreter that runs heron-py as of ``rev``: a worktree plus a venv whose only own
    package is that worktree (editable); every dependency comes from this venv."""
    return checkout(rev)[0]


def checkout(rev: str) -> tuple[str, Path]:
    """``checkout_python``'s interpreter and the worktree it runs (for a bench that also runs
    that revision's own bench files)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    base = Path(tempfile.gettempdir()) / f"heron-py-ab-{sha}"
    tree, venv = base / "tree", base / "venv"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha], check=True)
    if (tree / "heron_py" / "hotpath.py").exists() and not list((tree / "heron_py").rglob("*.so")):
        # a revision with the compiled hot path runs compiled, as it would be installed: without
        # this, A would run its .py files and the A/B would also measure the compilation
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                       capture_output=True)
    py, _ = tree_venv(venv, tree)
    return py, tree


def tree_venv(venv: Path, tree: Path) -> tuple[str, str]:
    """(interpreter, its site-packages folder) of a venv that runs ``tree`` with this venv's
    packages: the tree first, then this venv's site-packages (a .pth line adds the folder, not
    the editable finders in it)."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "ab-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    Path(site, "00-ab-tree.pth").write_text(f"import sys; sys.path.insert(0, {str(tree)!r})\n")
    return str(py), site


_NO_MAC = """# bench/ab.py --no-mac: every frame's MAC a no-op (the cost of authentication, measured alone)
from heron_py.common import frameauth

_TAG = bytes(frameauth.TAG_SIZE)
frameauth.FrameMac.tag = lambda self, frame: _TAG
frameauth.FrameMac.check = lambda self, frame, tag: True
"""


def nomac_python() -> str:
    """An interpreter that runs this tree with every frame's MAC a no-op: a venv whose only own
    files are this tree's path first and a startup module that patches FrameMac."""
    py, site = tree_venv(Path(tempfile.gettempdir()) / "heron-py-ab-nomac" / "venv", ROOT)
    Path(site, "_heron_ab_nomac.py").write_text(_NO_MAC)
    Path(site, "zz-ab-nomac.pth").write_text("import _heron_ab_nomac\n")
    return str(py)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("key", nargs="?")
    ap.add_argument("a", nargs="?")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--rev", help="A: the engine at this git revision; B: the working tree")
    ap.add_argument("--rev-b", help="with --rev: B is the engine at this git revision instead of the working "
                    "tree (one change measured alone, without what came after it)")
    ap.add_argument("--no-mac", action="store_true", help="A: this tree with every frame's MAC a no-op")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=300_000)
    ap.add_argument("--acking", action="store_true")
    ap.add_argument("--latency", type=float, default=0.0, metavar="RATE")
    ap.add_argument("--program", default="wc_topology.py",
                    help="the bench program both sides run (streamlet_wc.py: the Streamlet word count)")
    ap.add_argument("--program-arg", action="append", default=[],
                    help="an argument after the program's own three (streamlet_wc.py's 'keyed')")
    args = ap.parse_args()
    print(f"this tree: {hot_path()}")
    home = Path(tempfile.mkdtemp(prefix="heron-ab-"))
    if args.rev or args.no_mac:
        rev_ab(args, home)
        return
    if args.b is None:
        ap.error("expected KEY A B, or --rev REV")
    if args.latency:
        keys = args.key.split(",")
        for rep in range(args.reps):
            for v in (args.a, args.b):
                props = dict(zip(keys, v.split(","), strict=True))
                r = latency(args.latency, args.acking, home, 5, 15, 0, props)["e2e"]
                print(f"rep {rep} {args.key}={v}: p50 {r['p50_ms']:.2f} ms, p90 {r['p90_ms']:.2f} ms, "
                      f"p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms", flush=True)
        return
    keys = args.key.split(",")
    props = {v: dict(zip(keys, v.split(","), strict=True)) for v in (args.a, args.b)}
    res: dict[str, list[float]] = {args.a: [], args.b: []}
    pss: dict[str, list[float]] = {args.a: [], args.b: []}
    cpu: dict[str, list[float | None]] = {args.a: [], args.b: []}
    roles: dict[str, list[dict[str, float | None]]] = {args.a: [], args.b: []}
    bases = []
    for _ in range(args.reps):
        bases.append(plain(args.sentences)["words_per_s"])
        for v in (args.a, args.b):
            r = ours(args.sentences, args.acking, home, props[v], program=args.program,
                     program_args=tuple(args.program_arg))
            res[v].append(r["words_per_s"])
            pss[v].append(r["pss"])
            cpu[v].append(r["cpu_us_per_word"])
            roles[v].append(r.get("cpu_us_per_word_by_role", {}))
    base = statistics.median(bases)
    print(f"\nplain loop {base:,.0f} words/s (median of {args.reps})")
    _print_roles(roles)
    for v, xs in res.items():
        m = statistics.median(xs)
        runs = ", ".join(f"{x:,.0f}" for x in xs)
        print(f"{args.key}={v}: {m:,.0f} words/s = {m / base:.3f}x plain  (runs: {runs}); "
              f"peak PSS {statistics.median(pss[v]):.0f} MB")
        print(f"  {_cpu_line(cpu[v])}")
    ma, mb = statistics.median(res[args.a]), statistics.median(res[args.b])
    print(f"B/A = {mb / ma:.3f}")
    _print_cpu_ratio(cpu[args.a], cpu[args.b])


def rev_ab(args: argparse.Namespace, home: Path) -> None:
    if args.no_mac:
        sides = {"A this tree, frame MAC a no-op": nomac_python(), "B this tree": sys.executable}
    else:
        b_side = (f"B {args.rev_b}", checkout_python(args.rev_b)) if args.rev_b else ("B this tree", sys.executable)
        sides = {f"A {args.rev}": checkout_python(args.rev), b_side[0]: b_side[1]}
    res: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float | None]] = {k: [] for k in sides}
    roles: dict[str, list[dict[str, float | None]]] = {k: [] for k in sides}
    bases = []
    for rep in range(args.reps):
        bases.append(plain(args.sentences)["words_per_s"])
        # A, B, then B, A: the side that runs second in a pair ran measurably slower on this
        # machine (an A/A pair, both sides one tree, gave 0.92), so neither side always goes first
        order = list(sides.items()) if rep % 2 == 0 else list(sides.items())[::-1]
        for name, py in order:
            r = ours(args.sentences, args.acking, home, None, py, program=args.program,
                     program_args=tuple(args.program_arg))
            res[name].append(r["words_per_s"])
            cpu[name].append(r["cpu_us_per_word"])
            roles[name].append(r.get("cpu_us_per_word_by_role", {}))
    base = statistics.median(bases)
    print(f"\nplain loop {base:,.0f} words/s (median of {args.reps})")
    _print_roles(roles)
    for name, xs in res.items():
        m = statistics.median(xs)
        print(f"{name}: {m:,.0f} words/s = {m / base:.3f}x plain  (runs: {', '.join(f'{x:,.0f}' for x in xs)})")
        print(f"  {_cpu_line(cpu[name])}")
    ma, mb = (statistics.median(x) for x in res.values())
    print(f"B/A = {mb / ma:.3f}")
    _print_cpu_ratio(*cpu.values())


def _print_roles(roles: dict[str, list[dict[str, float | None]]]) -> None:
    """CPU per word by process role (all tasks of a component summed), median over the runs, per
    side, and B/A: which process a change made cheaper or dearer."""
    (na, ra), (nb, rb) = roles.items()
    names = sorted({k for run in ra + rb for k in run})
    if not names:
        return
    print(f"CPU us/word by role: {na} | {nb} | B/A")
    for k in names:
        a, b = _median_cpu([x.get(k) for x in ra]), _median_cpu([x.get(k) for x in rb])
        ratio = f"{b / a:.3f}" if a and b else "-"
        print(f"  {k:>24}: {a or 0:.3f} | {b or 0:.3f} | {ratio}")


def _median_cpu(xs: list[float | None]) -> float | None:
    got = [x for x in xs if x is not None]
    return statistics.median(got) if got else None


def _print_cpu_ratio(a: list[float | None], b: list[float | None]) -> None:
    ca, cb = _median_cpu(a), _median_cpu(b)
    if ca and cb:
        print(f"CPU per word B/A = {cb / ca:.3f}")


def _cpu_line(xs: list[float | None]) -> str:
    """The topology's CPU per word in the run's steady middle (bench/run.py steady_cpu_us_per_word)."""
    m = _median_cpu(xs)
    runs = ", ".join("-" if x is None else f"{x:.3f}" for x in xs)
    return f"CPU {m:.3f} us/word (runs: {runs})" if m is not None else f"CPU per word not measured (runs: {runs})"


if __name__ == "__main__":
    main()
