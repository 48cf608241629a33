"""What the topology package ships (issue 36), without running a topology: whole top-level
packages with their data and extension files, distributions with their metadata, shell
scripts beside the topology, and the one-line refusals."""

import io
import zipfile

import pytest

from heron_py.common.package import PackageError, check_size, make_package, shell_files, shell_script


@pytest.mark.parametrize("command, script", [
    (["python3", "splitsentence.py"], "splitsentence.py"),
    ("python3 -u bolts/split.py --fast", "bolts/split.py"),
    (["node", "splitsentence.js"], "splitsentence.js"),
    (["./run.sh", "x"], "./run.sh"),
    (["python3", "-m", "mybolt"], None),
    (["bash", "-c", "echo hi"], None),
    (["streamparse_run", "bolts.WordCount"], None),
    (["python3", "/opt/scripts/split.py"], None),
])
def test_the_script_a_shell_command_runs(command, script):
    assert shell_script(command) == script


def _names(data: bytes) -> set[str]:
    return set(zipfile.ZipFile(io.BytesIO(data)).namelist())


def test_whole_packages_with_data_extension_files_and_their_distribution(tmp_path):
    topo_dir, target = tmp_path / "topo", tmp_path / "target"
    (topo_dir / "helpers").mkdir(parents=True)
    (topo_dir / "helpers" / "__init__.py").write_text("")
    (topo_dir / "helpers" / "late.py").write_text("X = 1\n")  # imported by no import line
    (topo_dir / "helpers" / "table.csv").write_text("a,b\n")
    (topo_dir / "helpers" / "__pycache__").mkdir()
    (topo_dir / "helpers" / "__pycache__" / "late.cpython-311.pyc").write_bytes(b"")
    (topo_dir / "unused.py").write_text("")  # never imported: not shipped
    (target / "lib" / "sub").mkdir(parents=True)
    (target / "lib" / "__init__.py").write_text("")
    (target / "lib" / "sub" / "_fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (target / "lib-1.0.dist-info").mkdir()
    (target / "lib-1.0.dist-info" / "METADATA").write_text("Name: lib\n")
    (target / "lib-1.0.dist-info" / "RECORD").write_text(
        "lib/__init__.py,,\nlib/sub/_fast.cpython-311-x86_64-linux-gnu.so,,\nlib-1.0.dist-info/METADATA,,\n"
        "lib-1.0.dist-info/RECORD,,\n../../bin/lib-tool,,\n")
    (topo_dir / "topo.py").write_text("import helpers\n\ndef f():\n    import lib\n")
    pkg = make_package(topo_dir / "topo.py", [], [str(target)])
    assert _names(pkg.data) == {"__heron_package__.json", "topo.py", "helpers/__init__.py", "helpers/late.py",
                                "helpers/table.csv", "lib/__init__.py", "lib/sub/_fast.cpython-311-x86_64-linux-gnu.so",
                                "lib-1.0.dist-info/METADATA", "lib-1.0.dist-info/RECORD"}
    assert pkg.sizes["helpers/table.csv"] == 4 and len(pkg.sizes) == 9


def test_a_script_beside_the_topology_ships_where_the_subprocess_runs(tmp_path):
    (tmp_path / "topo.yaml").write_text("")
    (tmp_path / "split.py").write_text("import storm\n")
    (tmp_path / "storm.py").write_text("")
    assert shell_files(tmp_path / "topo.yaml", {"split": ["python3", "split.py"]}) == {
        "split.py": (tmp_path / "split.py").resolve(), "storm.py": (tmp_path / "storm.py").resolve()}
    (tmp_path / "resources").mkdir()  # the subprocess runs in resources/ when there is one
    assert set(shell_files(tmp_path / "topo.yaml", {"split": "python3 split.py"})) == {"resources/split.py",
                                                                                       "resources/storm.py"}
    (tmp_path / "resources" / "split.py").write_text("")
    assert shell_files(tmp_path / "topo.yaml", {"split": "python3 split.py"}) == {}


def test_refusals_are_one_line(tmp_path):
    (tmp_path / "topo.py").write_text("import proto\n")
    (tmp_path / "proto").mkdir()
    (tmp_path / "proto" / "__init__.py").write_text("")
    with pytest.raises(PackageError) as e:
        make_package(tmp_path / "topo.py", [], [])
    assert str(e.value) == (f"{tmp_path / 'proto'}: a user module named 'proto', like heron-py's own top-level "
                            f"package 'proto' (heron_py, heronpy, topology_master, stream_manager, instance, "
                            f"metrics_manager, proto are the engine's); rename it (e.g. 'my_proto') and its imports")
    (tmp_path / "topo.py").write_text("x = 1\n")
    pkg = make_package(tmp_path / "topo.py", [], [])
    check_size(pkg, pkg.total_bytes)  # at the limit: fine
    with pytest.raises(PackageError) as e:
        check_size(pkg, 10)
    assert str(e.value) == (f"the topology package is {pkg.total_bytes} bytes in 2 files, over "
                            f"heron_py.package.max.bytes (10 bytes); largest: __heron_package__.json "
                            f"({pkg.sizes['__heron_package__.json']} bytes), topo.py (6 bytes); move data out of "
                            f"the shipped folders or raise heron_py.package.max.bytes")
