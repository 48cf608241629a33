import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the test session: a JVM start costs about 10 s."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from heron_py.cli.spark_cmds import spark_session

    s = spark_session("local[2]", "heron-py tests")
    yield s
    s.stop()
