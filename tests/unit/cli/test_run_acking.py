"""``heron-py run`` of an at-least-once topology: the spout's ack() and fail() are called as in
a submitted topology (a bolt's fail, and a timeout after topology.message.timeout.secs), and
topology.max.spout.pending holds the spout back while trees are in flight; an effectively-once
topology, whose checkpoints run does not take, is refused in one line."""

import os
import re
import subprocess
import sys
import textwrap

CLI = [sys.executable, "-m", "heron_py.cli.main"]

TOPOLOGY = textwrap.dedent('''
    from heronpy.api.bolt.bolt import Bolt
    from heronpy.api.spout.spout import Spout
    from heronpy.api.topology import TopologyBuilder


    class Numbers(Spout):
        outputs = ["n"]

        def initialize(self, config, context):
            self.n = 0
            self.acked, self.failed = [], []
            self.most_in_flight = 0

        def next_tuple(self):
            if self.n < 30:
                self.n += 1
                self.emit([self.n], tup_id=self.n)
                in_flight = self.n - len(self.acked) - len(self.failed)
                self.most_in_flight = max(self.most_in_flight, in_flight)

        def ack(self, tup_id):
            self.acked.append(tup_id)

        def fail(self, tup_id):
            self.failed.append(tup_id)

        def close(self):
            print(f"spout: acked {len(self.acked)}, failed {sorted(self.failed)}, "
                  f"at most {self.most_in_flight} in flight", flush=True)


    class Check(Bolt):
        """Fails the tens, holds the fives (they time out), acks the rest."""
        outputs = []

        def process(self, tup):
            n = tup.values[0]
            if n % 10 == 0:
                self.fail(tup)
            elif n % 10 != 5:
                self.ack(tup)


    if __name__ == "__main__":
        b = TopologyBuilder("alo")
        b.add_bolt("check", Check, par=1, inputs=[b.add_spout("numbers", Numbers, par=1)])
        b.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.message.timeout.secs": 1,
                      "topology.max.spout.pending": 2})
        b.build_and_submit()
''')


def test_run_acks_fails_and_times_out_the_spouts_tuples_and_holds_it_at_max_pending(tmp_path):
    (tmp_path / "alo.py").write_text(TOPOLOGY)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([*CLI, "run", "alo.py", "--duration", "6"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # 5, 15 and 25 time out (held by the bolt); 10, 20 and 30 fail; with 2 in flight at most, the
    # spout waits for 5 to time out before it emits 16, and for 15 before 26
    assert "spout: acked 24, failed [5, 10, 15, 20, 25, 30], at most 2 in flight" in lines, p.stdout
    assert re.fullmatch(r"ran 'alo' for \d+\.\d s; tuples received per bolt: check 30; "
                        r"spout tuples acked 24, failed 6", lines[-1]), lines[-1]


def test_run_refuses_an_effectively_once_topology_in_one_line(tmp_path):
    (tmp_path / "eo.py").write_text(TOPOLOGY.replace('"ATLEAST_ONCE"', '"EFFECTIVELY_ONCE"').replace('"alo"', '"eo"'))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([*CLI, "run", "eo.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == ("heron-py: error: run: topology 'eo' asks for EFFECTIVELY_ONCE (topology.reliability.mode), "
                        "whose checkpoints run does not take; expected ATMOST_ONCE or ATLEAST_ONCE, or submit it to "
                        "the local cluster: heron-py submit local eo.py\n")
