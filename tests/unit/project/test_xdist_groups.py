"""The suite's grouping for pytest-xdist (tests/conftest.py): shared services in one group each,
every other test with its module."""

from pathlib import Path

from tests.conftest import xdist_group_of


def test_shared_services_each_run_in_one_group():
    assert xdist_group_of("tests/integration/test_slurm_topology.py::test_x[tls]", ["slurm_cluster", "tmp_path"]) \
        == "slurm"
    assert xdist_group_of("tests/integration/test_zk_state.py::test_y", ["zk", "zk_server"]) == "zookeeper"
    assert xdist_group_of("tests/spark/test_batch.py::test_z", ["spark"]) == "spark"
    assert xdist_group_of("tests/spark/test_cli.py::test_w", ["tmp_path"]) == "spark"
    assert xdist_group_of("tests/chaos/test_eo_checker.py::test_seed[1]", ["tmp_path"]) == "chaos"
    assert xdist_group_of("tests/unit/connectors/rabbitmq/test_connectors.py::test_a", []) == "rabbitmq"
    assert xdist_group_of("tests/integration/test_rabbitmq_word_count.py::test_b", []) == "rabbitmq"


def test_other_tests_stay_with_their_module():
    assert xdist_group_of("tests/integration/test_kafka.py::test_one", ["heron_home"]) == \
        "tests/integration/test_kafka.py"
    assert xdist_group_of("tests/unit/common/test_framing.py::test_two[3]", []) == "tests/unit/common/test_framing.py"


def test_every_path_of_the_pure_pass_exists():
    """scripts/test.sh runs the paths of scripts/pure_tests.txt on the pure-Python fallback: a
    renamed or removed test file would make that pass fail at collection, or silently run less."""
    root = Path(__file__).resolve().parents[3]
    lines = (root / "scripts" / "pure_tests.txt").read_text().splitlines()
    paths = [line for line in lines if line and not line.startswith("#")]
    assert "tests/unit" in paths
    missing = [p for p in paths if not (root / p).exists()]
    assert missing == []
