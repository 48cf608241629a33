import os
import sys

import pytest

# The tests' Spark jobs are small and short: a JVM that compiles with C1 only (no C2) spends
# less CPU compiling than it saves, measured 160 s -> 140 s for tests/spark alone on the 2-core
# CI machine kind. The session below and every `heron-py batch` a test runs inherit it (pyspark
# reads PYSPARK_SUBMIT_ARGS when it starts its JVM). Users' own runs keep the JVM's defaults.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the test session: a JVM start costs about 10 s."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from heron_py.cli.spark_cmds import spark_session

    s = spark_session("local[2]", "heron-py tests")
    yield s
    s.stop()
