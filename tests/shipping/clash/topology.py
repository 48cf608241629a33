import instance  # noqa: F401  (the user's instance.py beside this file)
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.topology import TopologyBuilder


class S(Spout):
    outputs = ["x"]


class B(Bolt):
    outputs = []


b = TopologyBuilder("clash")
b.add_bolt("b", B, par=1, inputs=[b.add_spout("s", S, par=1)])
b.build_and_submit()
