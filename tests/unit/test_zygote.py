"""The fork server (heron_py/scheduler/zygote.py, forked.py) with real processes: a driver
process plays the executor (a subreaper), starts a zygote, has it fork children, and reports
what it saw; the test checks the children's parent, command line, exit codes and signals."""

import json
import os
import subprocess
import sys
import textwrap

import psutil
import pytest

DRIVER = textwrap.dedent("""
    import json, logging, os, signal, sys, time
    from pathlib import Path
    import psutil
    from heron_py.scheduler.forked import Zygote, ZygoteError
    from heron_py.scheduler.zygote import become_subreaper

    work = Path(sys.argv[1])
    out = {"subreaper": become_subreaper()}
    with open(work / "zygote.log", "ab") as zlog:
        z = Zygote(dict(os.environ), work, zlog, master=False, log=logging.getLogger("t"))
        title = f"{sys.executable} -m zchild --task-id 7 --component split"
        ok = z.spawn("zchild", ["ok", str(work / "ok.json")], work, work / "ok.log", title)
        code = ok.wait(timeout=30)
        out["ok"] = {"code": code, "report": json.loads((work / "ok.json").read_text())}
        out["ok_log"] = (work / "ok.log").read_text()
        bad = z.spawn("zchild", ["raise"], work, work / "bad.log", "x")
        out["bad"] = {"code": bad.wait(timeout=30), "log": (work / "bad.log").read_text()}
        slow = z.spawn("zchild", ["sleep"], work, work / "slow.log", title)
        out["driver_pid"] = os.getpid()
        time.sleep(0.5)
        out["slow_ppid"] = psutil.Process(slow.pid).ppid()
        out["slow_cmdline"] = psutil.Process(slow.pid).cmdline()
        out["slow_env"] = psutil.Process(slow.pid).environ().get("ZMARK")
        z.proc.kill()  # a dead zygote takes no child with it
        z.proc.wait()
        time.sleep(0.2)
        out["slow_alive_after_zygote"] = slow.poll() is None
        slow.kill()
        out["slow_code"] = slow.wait(timeout=30)
        try:
            z.spawn("zchild", ["ok", "x"], work, work / "x.log", "z")
        except ZygoteError as e:
            out["dead_zygote"] = str(e)
    print(json.dumps(out))
""")

CHILD = textwrap.dedent("""
    import json, os, sys, time
    what = sys.argv[1]
    if what == "ok":
        print("hello from the child")
        with open(sys.argv[2], "w") as f:
            json.dump({"argv": sys.argv, "ppid": os.getppid(), "cwd": os.getcwd(),
                       "preloaded": "instance.main" in sys.modules, "stdin": sys.stdin.read()}, f)
        sys.exit(3)
    if what == "raise":
        raise RuntimeError("boom in the child")
    time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server needs Linux's child subreaper")
def test_children_are_forked_preloaded_named_and_reaped_by_the_subreaper(tmp_path):
    (tmp_path / "zchild.py").write_text(CHILD)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONUNBUFFERED": "1", "ZMARK": "topology-id"}
    p = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["subreaper"] is True
    ok = out["ok"]
    assert ok["code"] == 3
    rep = ok["report"]
    assert rep["argv"][1:] == ["ok", str(tmp_path / "ok.json")]
    assert rep["preloaded"] is True  # the zygote's imports, not made again
    assert rep["cwd"] == str(tmp_path) and rep["stdin"] == ""
    assert "hello from the child" in out["ok_log"]
    assert out["bad"]["code"] == 1 and "RuntimeError: boom in the child" in out["bad"]["log"]
    # the child is the driver's (the subreaper's), and says what it runs
    assert out["slow_ppid"] == out["driver_pid"]
    assert out["slow_cmdline"][1:] == ["-m", "zchild", "--task-id", "7", "--component", "split"]
    assert out["slow_env"] == "topology-id"  # the environ the schedulers find processes by is intact
    assert out["slow_alive_after_zygote"] is True and out["slow_code"] == -9
    assert out["dead_zygote"].startswith("zygote gone") or out["dead_zygote"].startswith("zygote exited")
    assert not [c for c in psutil.Process().children(recursive=True) if "zchild" in _cmdline(c)]


def _cmdline(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # another test's process, gone or a zombie
        return ""
