"""``heron-py run`` of a heronpy window bolt: its windows fire on the tick rate the bolt sets in
``initialize`` (read after it, as the instance reads it), so a local run shows them."""

import os
import re
import subprocess
import sys
import textwrap

CLI = [sys.executable, "-m", "heron_py.cli.main"]

TOPOLOGY = textwrap.dedent('''
    import time

    from heronpy.api.bolt.window_bolt import TumblingWindowBolt
    from heronpy.api.spout.spout import Spout
    from heronpy.api.stream import Grouping
    from heronpy.api.topology import TopologyBuilder


    class Numbers(Spout):
        outputs = ["n"]

        def initialize(self, config, context):
            self.n = 0

        def next_tuple(self):
            if self.n < 200:
                self.n += 1
                self.emit([self.n])
                time.sleep(0.01)


    class Window(TumblingWindowBolt):
        outputs = []

        def processWindow(self, window_info, tuples):
            print(f"window of {len(tuples)}", flush=True)


    if __name__ == "__main__":
        b = TopologyBuilder("win")
        b.add_bolt("window", Window, par=1, inputs={b.add_spout("numbers", Numbers, par=1): Grouping.SHUFFLE},
                   config={TumblingWindowBolt.WINDOW_DURATION_SECS: 1})
        b.build_and_submit()
''')


def test_run_fires_a_window_bolts_windows(tmp_path):
    (tmp_path / "win.py").write_text(TOPOLOGY)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([*CLI, "run", "win.py", "--duration", "4"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    sizes = [int(n) for n in re.findall(r"^window of (\d+)$", p.stdout, re.M)]
    assert len(sizes) >= 2, p.stdout  # about one a second
    assert sum(sizes) == 200, p.stdout  # every tuple in exactly one window (the last at the close)
