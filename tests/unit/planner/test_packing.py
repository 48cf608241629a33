"""Round-robin packing: dense task ids, even containers, deterministic."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from heron_py.planner.model import ComponentDef, ComponentKind, PickledRef, TopologyDef
from heron_py.planner.packing import round_robin


def topo(pars: list[int]) -> TopologyDef:
    comps = tuple(
        ComponentDef(f"c{i}", ComponentKind.SPOUT if i == 0 else ComponentKind.BOLT, PickledRef(b""), "m:C", p, (), ())
        for i, p in enumerate(pars)
    )
    return TopologyDef("t", comps)


@st.composite
def plans(draw):
    pars = draw(st.lists(st.integers(1, 12), min_size=1, max_size=8))
    return pars, draw(st.integers(1, sum(pars)))


@given(plans())
def test_dense_ids_even_containers_components_in_order(case):
    pars, n = case
    p = round_robin(topo(pars), n)
    assert [t.task_id for t in p.tasks] == list(range(1, sum(pars) + 1))
    assert [t.component for t in p.tasks] == [f"c{i}" for i, par in enumerate(pars) for _ in range(par)]
    per_comp = Counter(t.component for t in p.tasks)
    assert all(per_comp[f"c{i}"] == par for i, par in enumerate(pars))
    assert all(sorted(t.component_index for t in p.tasks if t.component == c) == list(range(k))
               for c, k in per_comp.items())
    load = Counter(t.container for t in p.tasks)
    assert set(load) == set(range(n))  # no empty container
    assert max(load.values()) - min(load.values()) <= 1
    assert p == round_robin(topo(pars), n)  # deterministic
    assert p.num_containers == n
