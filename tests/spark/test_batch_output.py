"""Writing a batch run's outputs: the local Parquet writer (pyarrow in the Spark workers) against
Spark's own DataFrame writer on the same rows, its errors, and that a failed write keeps the
earlier output."""

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from heron_py.cli.submit import load_topology_file
from heron_py.common.package import build_package
from heron_py.spark.batch import batch_outputs
from heron_py.spark.output import PARQUET, BatchOutput, _local_path
from heron_py.spark.plan import BatchError

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HERE = Path(__file__).resolve().parent
TOPOLOGY = HERE / "typed_topology.py"
MIXED = ("row index 100 of partition 0 ('s201',) does not fit the types inferred from the first rows "
         "(struct<v:bigint>): [FIELD_DATA_TYPE_UNACCEPTABLE_WITH_NAME] field v: LongType() can not accept object "
         "'s201' in type <class 'str'>.")


@pytest.fixture(scope="module")
def outputs(spark) -> dict[str, BatchOutput]:
    topo = load_topology_file(TOPOLOGY, [])
    package = build_package(TOPOLOGY, [], [p for p in sys.path if p])
    return batch_outputs(spark, topo, {}, ["typed", "mixed", "nulls", "quiet", "clash"], package=package)


def test_local_writer_gives_what_spark_writes(spark, outputs, tmp_path):
    from tests.spark import typed_topology as tt

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert outputs["typed"].write(spark, str(ours)) == (PARQUET, tt.COUNT)
    outputs["typed"].dataframe(spark).write.parquet(str(theirs))
    a, b = spark.read.parquet(str(ours)), spark.read.parquet(str(theirs))
    assert a.schema == b.schema
    assert [f.name for f in a.schema.fields] == tt.TYPED
    assert sorted(a.collect()) == sorted(b.collect())
    assert len(a.collect()) == tt.COUNT
    # the rows are the values the bolt emitted, read back by pyarrow too
    table = pq.read_table(ours)
    got = {r["i"]: r for r in table.to_pylist()}
    want = tt.typed_row(7)
    assert (got[7]["s"], got[7]["raw"], got[7]["ints"], got[7]["d"], got[7]["pair"]) == (
        want[2], want[4], want[5], want[7], {"_1": 7, "_2": "p7"})
    assert (ours / "_SUCCESS").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours", "theirs"]  # no staging folder left


def test_a_row_that_does_not_fit_is_one_error_and_the_earlier_output_stays(spark, outputs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.parquet").write_text("from an earlier run")
    outputs["typed"].write(spark, str(out))
    assert not (out / "stale.parquet").exists()  # replaced, as Spark's overwrite mode does
    before = sorted(os.listdir(out))
    with pytest.raises(BatchError) as e:
        outputs["mixed"].write(spark, str(out))
    assert str(e.value) == f"--output mixed={out}: {MIXED}"
    assert sorted(os.listdir(out)) == before
    assert spark.read.parquet(str(out)).count() == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize(("output", "message"), [
    ("nulls", "field 'nothing' is None in all of the first 100 rows, so its type cannot be inferred; expected at "
              "least one value of its type among them"),
    ("clash", "the first 100 rows do not agree on their types: [CANNOT_MERGE_TYPE] Can not merge type `DoubleType` "
              "and `LongType`."),
])
def test_first_rows_with_no_one_type_are_one_error(spark, outputs, tmp_path, output, message):
    with pytest.raises(BatchError) as e:
        outputs[output].write(spark, str(tmp_path / "o"))
    assert str(e.value) == f"--output {output}={tmp_path / 'o'}: {message}"
    assert not (tmp_path / "o").exists()


def test_no_rows_give_an_empty_output_with_the_declared_columns(spark, outputs, tmp_path):
    assert outputs["quiet"].write(spark, str(tmp_path / "q")) == (PARQUET, 0)
    df = spark.read.parquet(str(tmp_path / "q"))
    assert (df.columns, df.count()) == (["x"], 0)


def test_an_output_where_no_folder_can_be_made_is_one_error(spark, outputs, tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    where = tmp_path / "file" / "out"
    with pytest.raises(BatchError) as e:
        outputs["typed"].write(spark, str(where))
    assert str(e.value) == f"--output typed={where}: {tmp_path / 'file'} is a file; expected a folder there"
    (tmp_path / "locked").mkdir(mode=0o500)
    where = tmp_path / "locked" / "out"
    if os.geteuid() != 0:  # root may write anywhere
        with pytest.raises(BatchError) as e:
            outputs["typed"].write(spark, str(where))
        assert str(e.value).startswith(f"--output typed={where}: cannot create a folder beside the output: "
                                       "Permission denied")


def test_only_local_paths_are_written_by_the_workers():
    assert _local_path("hdfs://namenode:8020/out") is None
    assert _local_path("s3a://bucket/out") is None
    assert _local_path("file:///tmp/out") == Path("/tmp/out")
    assert _local_path("file:/tmp/out") == Path("/tmp/out")
    assert _local_path("out/counts") == Path.cwd() / "out" / "counts"


def test_cli_reports_a_row_that_does_not_fit_in_one_line(tmp_path):
    env = dict(os.environ, HERON_PY_HOME=str(tmp_path), SPARK_LOCAL_IP="127.0.0.1")
    out = tmp_path / "mixed"
    proc = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "batch", "--output", f"mixed={out}",
                           str(TOPOLOGY)], text=True, capture_output=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1] == f"heron-py: error: --output mixed={out}: {MIXED}"
    assert "Traceback" not in proc.stderr
