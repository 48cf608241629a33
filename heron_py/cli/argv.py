"""Which words of a command line are heron-py's and which are the topology's (pure).

Heron's CLI habit: heron-py's own options are recognised anywhere on the line, before or after
the topology file; every other word after the file goes to the topology as its ``sys.argv[1:]``,
in order; ``--`` sends everything after it to the topology, so a topology option spelled like
one of heron-py's (``--name``) still reaches the topology. ``heron-py submit local wc.py
--dry-run`` is therefore a dry run, not a launch with ``--dry-run`` as the topology's argument.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Mapping, Sequence


def option_arities(parser: argparse.ArgumentParser) -> dict[str, int]:
    """Every option string of ``parser`` → how many words it takes after it (0 for flags)."""
    out: dict[str, int] = {}
    for action in parser._actions:
        arity = 0 if action.nargs == 0 else 1
        for s in action.option_strings:
            out[s] = arity
    return out


def split_topology_args(words: Sequence[str], arities: Mapping[str, int],
                        positionals: int) -> tuple[list[str], list[str]]:
    """(heron-py's words, the topology's words) of a verb's words after the verb.

    The first ``positionals`` words that are not options are heron-py's (the cluster and the
    file); a known option anywhere is heron-py's with its value (``--name x`` or ``--name=x``);
    an unknown word before the last positional stays heron-py's, so that argparse reports it;
    after it, unknown words are the topology's; ``--`` ends heron-py's words."""
    own: list[str] = []
    topo: list[str] = []
    seen = 0
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            topo.extend(words[i + 1:])
            break
        name, eq, _ = w.partition("=") if w.startswith("--") else (w, "", "")
        if w.startswith("-") and name in arities:
            take = 0 if eq else arities[name]
            own.extend(words[i:i + 1 + take])
            i += 1 + take
            continue
        if seen < positionals:
            own.append(w)
            if not w.startswith("-"):
                seen += 1
        else:
            topo.append(w)
        i += 1
    return own, topo


def cluster_name(value: str) -> str:
    """Heron's ``cluster/role/env`` names the cluster first; role and environment are
    accepted and not used (heron-py has one role and one environment per cluster)."""
    parts = value.split("/")
    if len(parts) > 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"{value!r}: expected CLUSTER or CLUSTER/ROLE/ENV, e.g. local or "
                                         f"local/alice/devel")
    return parts[0]


DEFAULT_CLUSTER = "local"
# what a topology file's name ends with (a Python file, or Storm's Flux YAML)
TOPOLOGY_SUFFIXES = (".py", ".yaml", ".yml")


def names_cluster(word: str, clusters: Collection[str]) -> bool:
    """Whether ``word`` names a known cluster, alone or as Heron's ``CLUSTER/ROLE/ENV``."""
    return word.split("/", 1)[0] in clusters


def positional_words(words: Sequence[str], arities: Mapping[str, int]) -> list[str]:
    """The words that are neither an option nor an option's value, up to ``--``."""
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            break
        if w.startswith("-") and len(w) > 1:
            name, eq, _ = w.partition("=")
            i += 1 + (0 if eq else arities.get(name, 0))
            continue
        out.append(w)
        i += 1
    return out


def with_default_cluster(words: Sequence[str], arities: Mapping[str, int], clusters: Collection[str], *,
                         places: int, takes_file: bool, is_file: Callable[[str], bool]) -> list[str]:
    """A verb's words after the verb, with ``local`` put first when the user left the cluster
    out, as Storm's and Heron's users do (``heron-py kill wc`` is ``heron-py kill local wc``).

    The first positional word is the cluster when it names a known cluster (a scheduler's
    name, alone or as CLUSTER/ROLE/ENV); otherwise it is the topology's name (or, for
    ``submit``, its file) and the cluster is ``local``, except where the word is plainly meant
    as a cluster, so that argparse's error names it: for a verb taking names, a word with a
    ``/`` (a topology name has none) or every one of the verb's ``places`` positionals given;
    for ``submit`` (``takes_file``), a word that is no file and has no topology file's suffix,
    with more words after it (a word alone is the file, whose error then says it is missing).
    A topology named like a cluster (``local``) so needs its cluster: ``heron-py kill local local``."""
    pos = positional_words(words, arities)
    if pos and takes_file and is_file(pos[0]):
        return [DEFAULT_CLUSTER, *words]  # local/wc.py, a file in a folder named like a cluster
    if pos and names_cluster(pos[0], clusters):
        return list(words)
    if pos and takes_file:
        if len(pos) > 1 and not pos[0].endswith(TOPOLOGY_SUFFIXES):
            return list(words)
    elif pos and ("/" in pos[0] or len(pos) >= places):
        return list(words)
    return [DEFAULT_CLUSTER, *words]
