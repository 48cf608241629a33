"""What the topology package holds for each shape of project (heron_py.common.layout), built
from the fake projects in tests/projects/ copied into a temporary folder (so the files a
project never ships can be added around them): a streamparse project's src/ whole, a Flux
YAML's folder whole, a Maven project's jar resources, a Python package folder with
__main__.py; the ignore list; the working folder in the manifest; the one-line refusals."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from heron_py.common.layout import MAVEN, layout_of, maven_resources
from heron_py.common.package import (
    MANIFEST,
    Package,
    PackageError,
    make_package,
    size_warning,
    unpack,
    working_folder,
)
from heron_py.multilang.setup import working_dir
from tests.foreign import Foreign, Ours

PROJECTS = Path(__file__).resolve().parents[3] / "projects"


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest)
    return dest


def _contents(pkg: Package) -> tuple[set[str], dict[str, object]]:
    with zipfile.ZipFile(io.BytesIO(pkg.data)) as z:
        return set(z.namelist()) - {MANIFEST}, json.loads(z.read(MANIFEST))


def _write(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _add_never_shipped(folder: Path) -> None:
    """What a project folder holds that no package ships: version control, caches, virtualenvs,
    build outputs, editor leftovers."""
    for rel in (".git/config", ".env", "__pycache__/m.cpython-311.pyc", "bolts/__pycache__/x.cpython-311.pyc",
                "m.pyc", ".venv/bin/python", ".venv/pyvenv.cfg", "venv311/pyvenv.cfg", "venv311/lib/site.py",
                "build/lib/m.py", "dist/proj-1.0.tar.gz", "proj.egg-info/PKG-INFO", ".mypy_cache/3.11/m.json",
                ".pytest_cache/v/cache/lastfailed", ".tox/py311/log.txt", "notes.txt~"):
        _write(folder / rel)


def test_a_streamparse_project_ships_src_whole_and_runs_in_it(tmp_path):
    project = _copy("streamparse_data", tmp_path)
    _add_never_shipped(project / "src")
    _write(project / "src" / "node_modules" / "left-pad" / "index.js")  # what a Node.js script loads: ships
    _write(project / "src" / "tools" / "build" / "__init__.py")  # a package named build is code: ships
    _write(project / "topologies" / "other.py")  # another topology: not this one's
    names, manifest = _contents(make_package(project / "topologies" / "datawords.py", [], []))
    assert names == {"datawords.py", "bolts/__init__.py", "bolts/stopwords.py", "bolts/stopwords.txt",
                     "spouts/__init__.py", "spouts/words.py", "resources/words.txt",
                     "node_modules/left-pad/index.js", "tools/build/__init__.py"}
    # Storm runs streamparse's components in the jar's resources/, which holds src/'s contents
    assert manifest["workdir"] == "" and manifest["main"] == "datawords.py" and manifest["package"] is None


def test_a_flux_yamls_folder_ships_whole(tmp_path):
    project = _copy("flux_data", tmp_path)
    _add_never_shipped(project)
    names, manifest = _contents(make_package(project / "topology.yaml", [], []))
    assert names == {"topology.yaml", "filter.py", "stopwords.txt"}
    assert manifest["workdir"] == ""
    _write(project / "resources" / "words.txt")  # Storm's convention: the scripts' folder
    names, manifest = _contents(make_package(project / "topology.yaml", [], [],
                                             {"filter": ["python3", "filter.py"]}))
    # the script beside the file is also shipped where its process runs (resources/)
    assert names == {"topology.yaml", "filter.py", "stopwords.txt", "resources/words.txt", "resources/filter.py"}
    assert manifest["workdir"] == "resources"


def test_a_maven_project_ships_what_its_jar_holds(tmp_path):
    project = _copy("maven_flux", tmp_path)
    _write(project / "target" / "maven-flux-1.0.jar")
    _add_never_shipped(project / "multilang" / "resources")
    yaml = project / "src" / "main" / "resources" / "topology.yaml"
    names, manifest = _contents(make_package(yaml, [], [], {"filter": ["python3", "filter.py"]}))
    # multilang/resources/ is the jar's resources/; the pom leaves *.md out; no Java, no target/
    assert names == {"topology.yaml", "resources/filter.py", "resources/stopwords.txt"}
    assert manifest["workdir"] == "resources"
    assert layout_of(yaml).kind == MAVEN


def _pom(root: Path, build: str = "", properties: str = "") -> None:
    _write(root / "pom.xml", f'<project xmlns="http://maven.apache.org/POM/4.0.0"><artifactId>p</artifactId>'
                             f'{properties}{build}</project>')


def test_a_pom_without_resources_means_src_main_resources_and_multilang(tmp_path):
    _pom(tmp_path)
    _write(tmp_path / "src" / "main" / "resources" / "flux" / "topo.yaml")
    _write(tmp_path / "src" / "main" / "resources" / "resources" / "split.py")
    _write(tmp_path / "multilang" / "resources" / "count.js")
    _write(tmp_path / "src" / "main" / "java" / "A.java")
    names, manifest = _contents(make_package(tmp_path / "src" / "main" / "resources" / "flux" / "topo.yaml", [], []))
    assert names == {"topo.yaml", "flux/topo.yaml", "resources/split.py", "resources/count.js"}
    assert manifest["workdir"] == "resources"
    # five folders down, no pom is looked for: the YAML's folder ships, as any Flux file's
    deep = tmp_path / "src" / "main" / "resources" / "a" / "b" / "topo.yaml"
    _write(deep)
    assert _contents(make_package(deep, [], []))[0] == {"topo.yaml"}


def test_a_poms_resources_with_includes_target_paths_and_properties(tmp_path):
    # storm-multilang/dotnet's shape: the YAML in resources/, included alone; the adapter built into output/
    _pom(tmp_path, "<build><resources>"
                   "<resource><directory>${basedir}/resources</directory>"
                   "<includes><include>topology.yaml</include></includes></resource>"
                   "<resource><directory>${project.basedir}/output</directory></resource>"
                   "<resource><directory>${scripts.dir}</directory><targetPath>resources/</targetPath></resource>"
                   "<resource><directory>${nowhere}/x</directory></resource>"
                   "</resources></build>",
         "<properties><scripts.dir>scripts</scripts.dir></properties>")
    _write(tmp_path / "resources" / "topology.yaml")
    _write(tmp_path / "resources" / "notes.txt")
    _write(tmp_path / "output" / "resources" / "Adapter.dll")
    _write(tmp_path / "scripts" / "lib" / "split.py")
    pkg = make_package(tmp_path / "resources" / "topology.yaml", [], [])
    assert _contents(pkg)[0] == {"topology.yaml", "resources/Adapter.dll", "resources/lib/split.py"}
    assert pkg.notes == (f"{tmp_path / 'pom.xml'}: resource directory '${{nowhere}}/x' names a property that is "
                         f"not in the pom's <properties>; expected a path relative to the project or ${{basedir}}; "
                         f"not shipped",)


def test_an_unreadable_pom_ships_mavens_default_and_says_so(tmp_path):
    _write(tmp_path / "pom.xml", "<project><build>")
    _write(tmp_path / "src" / "main" / "resources" / "resources" / "split.py")
    trees, notes = maven_resources(tmp_path)
    assert [t.source for t in trees] == [tmp_path / "src" / "main" / "resources"]
    assert notes == [Ours(f"{tmp_path / 'pom.xml'} cannot be read as a Maven POM (", Foreign("ParseError"),
                          "); shipping src/main/resources, Maven's default resources folder")]


def test_a_package_folder_ships_its_top_level_package_whole(tmp_path):
    root = _copy("heronpy_package", tmp_path)
    _add_never_shipped(root / "mytopo")
    names, manifest = _contents(make_package(root / "mytopo", ["wc"], []))
    assert names == {"mytopo/__init__.py", "mytopo/__main__.py", "mytopo/bolts.py", "mytopo/spouts.py",
                     "mytopo/words.py", "mytopo/data/letters.txt"}
    assert manifest == {"main": "mytopo/__main__.py", "argv": ["wc"], "workdir": "mytopo", "package": "mytopo",
                        "modules": ["mytopo/__init__.py", "mytopo/bolts.py", "mytopo/spouts.py", "mytopo/words.py"]}
    # a package inside a package runs under its dotted name; the outermost ships whole
    outer = tmp_path / "src" / "outer"
    shutil.copytree(root / "mytopo", outer / "mytopo")
    _write(outer / "__init__.py", "")
    _write(outer / "common.py", "")
    names, manifest = _contents(make_package(outer / "mytopo", [], []))
    assert {"outer/__init__.py", "outer/common.py", "outer/mytopo/__main__.py"} <= names
    assert (manifest["main"], manifest["package"], manifest["workdir"]) == ("outer/mytopo/__main__.py",
                                                                          "outer.mytopo", "outer/mytopo")


def test_a_package_loads_in_a_container_with_its_relative_imports(tmp_path):
    data = make_package(_copy("heronpy_package", tmp_path) / "mytopo", [], []).data
    dest = tmp_path / "unpacked"
    unpack(data, dest)
    code = ("import sys; from pathlib import Path; from heron_py.common.package import load_main; "
            "from heron_py.multilang.setup import package_dir, package_working_dir; "
            f"m = load_main(Path({str(dest)!r})); "
            "print(m.__name__, m.__package__, m.Sink.__module__, m.Letters.__module__, "
            "len(m.Letters.__module__ and sys.modules['mytopo.spouts'].DATA.read_text()), "
            "package_dir(), package_working_dir())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["__heron_main__", "mytopo", "__heron_main__", "mytopo.spouts", "6", str(dest),
                                str(dest / "mytopo")]


def test_the_working_folder_is_the_manifests(tmp_path):
    project = _copy("streamparse_data", tmp_path)
    dest = tmp_path / "unpacked"
    unpack(make_package(project / "topologies" / "datawords.py", [], []).data, dest)
    assert (dest / "resources").is_dir()  # src/resources/: data, not the working folder
    assert working_folder(dest) == dest and working_dir(package=dest) == dest
    manifest = json.loads((dest / MANIFEST).read_text())
    del manifest["workdir"]  # a package from before the manifest named it: Storm's rule
    (dest / MANIFEST).write_text(json.dumps(manifest))
    assert working_folder(dest) is None and working_dir(package=dest) == dest / "resources"
    # a Maven project without scripts: its package has no resources/, and runs in the package folder
    yaml = _copy("maven_flux", tmp_path) / "src" / "main" / "resources" / "topology.yaml"
    shutil.rmtree(yaml.parents[3] / "multilang")
    maven = tmp_path / "maven_unpacked"
    unpack(make_package(yaml, [], []).data, maven)
    assert json.loads((maven / MANIFEST).read_text())["workdir"] == "resources"
    assert working_folder(maven) == maven and not (maven / "resources").exists()


def test_scripts_missing_from_the_working_folder_are_one_error(tmp_path):
    project = _copy("streamparse_data", tmp_path)
    with pytest.raises(PackageError) as e:
        make_package(project / "topologies" / "datawords.py", [], [], {"split": ["python3", "split.py"]})
    assert str(e.value) == (f"component 'split': its command ['python3', 'split.py'] runs split.py, which is not in "
                            f"the topology package's working folder; expected it at {project / 'src' / 'split.py'} "
                            f"(src/ ships whole as the working folder, as in streamparse's jar)")
    maven = _copy("maven_flux", tmp_path)
    with pytest.raises(PackageError) as e:
        make_package(maven / "src" / "main" / "resources" / "topology.yaml", [], [],
                     {"filter": "python3 bin/filter.py"})
    assert str(e.value) == (f"component 'filter': its command ['python3', 'bin/filter.py'] runs bin/filter.py, which "
                            f"is not in the topology package's working folder; expected it at "
                            f"{maven / 'src' / 'main' / 'resources' / 'resources' / 'bin' / 'filter.py'} or "
                            f"{maven / 'multilang' / 'resources' / 'bin' / 'filter.py'} (the jar's resources/ is "
                            f"the working folder, as in Storm)")


def test_a_file_named_like_the_topology_file_is_refused(tmp_path):
    project = _copy("streamparse_data", tmp_path)
    _write(project / "src" / "datawords.py", "")
    with pytest.raises(PackageError) as e:
        make_package(project / "topologies" / "datawords.py", [], [])
    assert str(e.value) == (f"{project / 'src' / 'datawords.py'}: it would ship as package entry 'datawords.py', "
                            f"the topology file {project / 'topologies' / 'datawords.py'}'s own name; expected one "
                            f"file per name: rename one of them")


def test_a_big_package_is_one_warning_naming_its_largest_files():
    pkg = Package(b"", {"__heron_package__.json": 100, "a.bin": 3 * 1024 * 1024, "b.txt": 2048, "c.py": 10,
                        "d.py": 5})
    assert size_warning(pkg, pkg.total_bytes) is None
    assert size_warning(pkg, 1024 * 1024) == (
        "the topology package is 3.0 MB in 5 files, over heron_py.package.warn.bytes (1.0 MB); largest: a.bin "
        "(3.0 MB), b.txt (2.0 KB), __heron_package__.json (100 bytes); every container unpacks it: keep data out "
        "of the shipped folders (never shipped: hidden files and folders (.git, .venv, .tox, .mypy_cache, "
        ".pytest_cache, ...); __pycache__; *.pyc; *.pyo; virtualenvs (a folder holding pyvenv.cfg); *.egg-info; "
        "build/ and dist/ that are not Python packages)")


def test_a_shipped_folder_holding_a_module_named_like_the_engines_is_refused(tmp_path):
    project = _copy("flux_data", tmp_path)
    _write(project / "instance" / "data.txt")  # a folder of data, no package: it hides nothing
    assert "instance/data.txt" in make_package(project / "topology.yaml", [], []).sizes
    _write(project / "instance" / "__init__.py", "")
    with pytest.raises(PackageError) as e:
        make_package(project / "topology.yaml", [], [])
    assert str(e.value) == (f"{project / 'instance'}: a user module named 'instance', like heron-py's own top-level "
                            f"package 'instance' (heron_py, heronpy, topology_master, stream_manager, instance, "
                            f"metrics_manager, proto are the engine's); rename it (e.g. 'my_instance') and its imports")
