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


FORK_DRIVER = textwrap.dedent("""
    import json, logging, os, sys, time
    from pathlib import Path
    import psutil
    from heron_py.scheduler.forked import Zygote
    from heron_py.scheduler.zygote import ROOM, ROOM_FLAG, become_subreaper

    work = Path(sys.argv[1])
    if ROOM_FLAG not in sys.argv:  # as the executor does: the same pid, with room for titles
        os.execv(sys.executable, [*sys.orig_argv, ROOM_FLAG, "." * ROOM])
    out = {"subreaper": become_subreaper(), "driver_pid": os.getpid()}
    z = Zygote.forked(master=False, log_path=work / "zygote.log", log=logging.getLogger("t"))
    out["zygote_ppid"] = psutil.Process(z.proc.pid).ppid()
    out["zygote_cmdline"] = psutil.Process(z.proc.pid).cmdline()
    env = {**os.environ, "PYTHONPATH": str(work / "lib"), "ZCHILD": "from the request", "PYTHONUNBUFFERED": "1"}
    ok = z.spawn("zchild", ["ok", str(work / "ok.json")], work, work / "ok.log",
                 f"{sys.executable} -m zchild --task-id 9", env)
    out["ok_code"] = ok.wait(timeout=30)
    out["report"] = json.loads((work / "ok.json").read_text())
    slow = z.spawn("zchild", ["sleep"], work, work / "slow.log", f"{sys.executable} -m zchild --task-id 10", env)
    time.sleep(0.5)
    out["slow_ppid"] = psutil.Process(slow.pid).ppid()
    out["slow_cmdline"] = psutil.Process(slow.pid).cmdline()
    out["slow_proc_environ"] = psutil.Process(slow.pid).environ().get("ZMARK")
    slow.kill()
    out["slow_code"] = slow.wait(timeout=30)
    z.stop()
    z.stop()  # idempotent
    out["zygote_code"] = z.proc.returncode
    print(json.dumps(out))
""")

FORK_CHILD = textwrap.dedent("""
    import json, os, sys, time
    if sys.argv[1] == "ok":
        import helper  # from the request's PYTHONPATH, which the driver did not start with
        with open(sys.argv[2], "w") as f:
            json.dump({"env": os.environ.get("ZCHILD"), "helper": helper.VALUE, "path0": sys.path[0],
                       "preloaded": "instance.main" in sys.modules, "cwd": os.getcwd()}, f)
        sys.exit(5)
    time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server needs Linux's child subreaper")
def test_a_zygote_forked_from_the_executor_gives_each_child_the_requested_environment(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("VALUE = 42\n")
    (tmp_path / "zchild.py").write_text(FORK_CHILD)
    (tmp_path / "driver.py").write_text(FORK_DRIVER)
    env = {**os.environ, "ZMARK": "topology-id"}
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=120, cwd=str(tmp_path / "lib"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["subreaper"] is True
    # the zygote is the driver's own child, and says what it is
    assert out["zygote_ppid"] == out["driver_pid"]
    assert out["zygote_cmdline"] == [sys.executable, "-m", "heron_py.scheduler.zygote"]
    assert out["ok_code"] == 5
    rep = out["report"]
    assert rep == {"env": "from the request", "helper": 42, "path0": str(tmp_path), "preloaded": True,
                   "cwd": str(tmp_path)}
    assert out["slow_ppid"] == out["driver_pid"]
    assert out["slow_cmdline"][1:] == ["-m", "zchild", "--task-id", "10"]
    assert out["slow_proc_environ"] == "topology-id"  # /proc environ: the driver's start environment
    assert out["slow_code"] == -9
    assert out["zygote_code"] == 0


ORPHAN_DRIVER = textwrap.dedent("""
    import json, os, sys, time
    from heron_py.scheduler.forked import reap_orphans
    from heron_py.scheduler.zygote import become_subreaper

    out = {"subreaper": become_subreaper()}
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:  # a daemon that starts a subprocess and dies before it
        gone = os.fork()
        if gone == 0:
            time.sleep(0.3)
            os._exit(4)
        os.write(w, str(gone).encode())
        os._exit(0)
    os.waitpid(mid, 0)
    orphan = int(os.read(r, 32))
    own = os.fork()  # a child of the driver's own, which exits too
    if own == 0:
        os._exit(7)
    time.sleep(1.0)  # both have exited; the orphan is the driver's now (its subreaper)
    with open(f"/proc/{orphan}/stat") as f:
        out["orphan_state_before"] = f.read().rsplit(")", 1)[1].split()[0]
    reaped = []
    for _ in range(3):
        reaped += reap_orphans({own})
        time.sleep(0.1)
    out["reaped"] = reaped
    out["orphan"] = orphan
    out["orphan_gone"] = not os.path.exists(f"/proc/{orphan}")
    out["own_code"] = os.waitstatus_to_exitcode(os.waitpid(own, 0)[1])  # left for its owner
    out["nothing_left"] = reap_orphans(set())
    print(json.dumps(out))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server needs Linux's child subreaper")
def test_the_subreaper_reaps_adopted_orphans_and_leaves_its_own_children(tmp_path):
    (tmp_path / "driver.py").write_text(ORPHAN_DRIVER)
    p = subprocess.run([sys.executable, str(tmp_path / "driver.py")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["subreaper"] is True
    assert out["orphan_state_before"] == "Z"  # a zombie of the driver's until reaped
    assert out["reaped"] == [out["orphan"]] and out["orphan_gone"] is True
    assert out["own_code"] == 7
    assert out["nothing_left"] == []
