"""``heron-py init`` writes a project that runs as written; ``heron-py run`` runs a topology in
one process for a bounded time and stops cleanly on Ctrl-C (issue 36)."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from heron_py.cli.init import project_files, write_project
from heron_py.cli.submit import SubmitError

CLI = [sys.executable, "-m", "heron_py.cli.main"]


def _env():
    # the project imports heron_py as an installed user would: from the interpreter, not its folder
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    parent = tmp_path_factory.mktemp("init")
    p = subprocess.run([*CLI, "init", "wordcount"], cwd=parent, capture_output=True, text=True, timeout=60,
                       env=_env())
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == ("created wordcount: README.md, bolts.py, spouts.py, test_topology.py, "
                                        "topology.py")
    return parent / "wordcount"


def test_the_projects_own_test_passes(project):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                       capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed" in p.stdout


def test_heron_py_run_runs_the_project_for_its_duration(project):
    t0 = time.monotonic()
    p = subprocess.run([*CLI, "run", "topology.py", "--duration", "2"], cwd=project, capture_output=True,
                       text=True, timeout=60, env=_env())
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "running 'wordcount' in this process for 2 s (Ctrl-C stops it)"
    # the count bolt's log lines (one per tick per task) show on the terminal
    assert any(" count-" in line and " words counted; top: " in line for line in lines), p.stdout
    # it ran its duration, then stopped: the time it reports (its last round, the drain and the
    # close included, so 2.1 on a loaded machine) is at least 2 s and at most the process's own
    m = re.fullmatch(r"ran 'wordcount' for (\d+\.\d) s; tuples received per bolt: count \d+, split \d+", lines[-1])
    assert m, lines[-1]
    assert 2.0 <= float(m.group(1)) <= took + 0.05
    assert took < 30


def test_heron_py_run_with_a_bounded_spout_and_idle_rounds_stops_early(project):
    p = subprocess.run([*CLI, "run", "topology.py", "--duration", "30", "--idle-rounds", "200",
                        "--config-property", "wordcount.sentences=10"], cwd=project, capture_output=True,
                       text=True, timeout=60, env=_env())
    assert p.returncode == 0, p.stderr
    # 10 sentences of 6, 8, 6, 6 and 6 words, twice: 64 words, 10 sentences
    last = p.stdout.splitlines()[-1]
    assert last.startswith("ran 'wordcount' for ") and last.endswith("tuples received per bolt: count 64, split 10")


def test_ctrl_c_stops_heron_py_run_cleanly(project):
    proc = subprocess.Popen([*CLI, "run", "topology.py", "--duration", "60"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("running 'wordcount'")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines()[-1].startswith("stopped 'wordcount' for ")
    assert "Traceback" not in err


def test_init_refuses_a_bad_name_and_a_folder_in_use(tmp_path):
    with pytest.raises(SubmitError) as e:
        project_files("9lives")
    assert str(e.value) == ("init '9lives': expected a name of letters, digits, '_' and '-' that starts with a "
                            "letter (it names the folder and the topology), e.g. wordcount")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    with pytest.raises(SubmitError) as e:
        write_project("taken", tmp_path)
    assert str(e.value) == (f"init taken: {tmp_path / 'taken'} already exists and is not an empty folder; "
                            f"expected a new folder (choose another name, or remove it)")


def test_heron_py_run_a_flux_file_whose_scripts_are_beside_it(tmp_path):
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    shutil.copytree(repo / "tests" / "shipping" / "flux_beside", tmp_path / "flux")
    # no storm.py beside the scripts, as in a Maven-built project: heron-py's own adapter serves
    p = subprocess.run([*CLI, "run", str(tmp_path / "flux" / "multilang.yaml"), "--duration", "2"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env=_env())
    assert p.returncode == 0, p.stderr
    last = p.stdout.splitlines()[-1]
    # the shell spout and bolt ran their scripts from the YAML's folder: words reached count and log
    counts = dict(part.rsplit(" ", 1) for part in last.split("tuples received per bolt: ")[1].split(", "))
    assert set(counts) == {"count", "log", "splitsentence"} and int(counts["count"]) > 0, last
