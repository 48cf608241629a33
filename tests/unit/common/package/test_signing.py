"""The topology package is signed under the topology secret, and executors check it before unpacking."""

import io
import json
import logging
import zipfile

import pytest

from heron_py.common.package import (
    MAC_SIZE,
    MANIFEST,
    SIGNATURE_HEADER,
    PackageError,
    build_package,
    sign_package,
    unpack,
)
from heron_py.planner.model import PackingPlan
from heron_py.scheduler.executor import Executor
from heron_py.state.localfs import LocalFsStateManager

SECRET = bytes(range(32))
WHERE = "executor 1: topology 'wc' (localfs)"
START = len(SIGNATURE_HEADER) + MAC_SIZE


def _expected(found):
    return (f"{WHERE}: refusing to unpack the topology package: expected the header "
            f"b'heron-py package hmac-sha256\\n' and an HMAC-SHA256 under the topology secret that matches "
            f"the package, found {found} (the package was changed or cut short after submit, or submitted by "
            f"a heron-py that did not sign packages; resubmit the topology)")


@pytest.fixture
def zipped(tmp_path):
    topo = tmp_path / "src" / "topo.py"
    topo.parent.mkdir()
    topo.write_text("X = 1\n")
    return build_package(topo, ["a", "b"], [])


def _refused(data, dest, secret=SECRET):
    with pytest.raises(PackageError) as e:
        unpack(data, dest, secret=secret, where=WHERE)
    # nothing was extracted from a package that failed the check
    assert not dest.exists()
    return str(e.value)


def test_signed_package_unpacks_and_still_opens_as_a_zip(zipped, tmp_path):
    signed = sign_package(zipped, SECRET)
    assert signed.startswith(SIGNATURE_HEADER) and signed[START:] == zipped
    manifest = unpack(signed, tmp_path / "out", secret=SECRET, where=WHERE)
    assert manifest["main"] == "topo.py" and manifest["argv"] == ["a", "b"]
    assert (tmp_path / "out" / "topo.py").read_text() == "X = 1\n"
    # tools that read the stored package as a zip (tests, operators) still can
    assert json.loads(zipfile.ZipFile(io.BytesIO(signed)).read(MANIFEST))["main"] == "topo.py"


@pytest.mark.parametrize("offset", [0, START - 1, START, START + 100, -1])
def test_a_flipped_byte_is_refused(zipped, tmp_path, offset):
    signed = bytearray(sign_package(zipped, SECRET))
    signed[offset] ^= 0x01
    msg = _refused(bytes(signed), tmp_path / "out")
    if offset == 0:  # the header itself
        head = bytes(signed[:len(SIGNATURE_HEADER)])
        assert msg == _expected(f"no signature header (the package starts with {head!r})")
    else:
        assert msg == _expected(f"a MAC that does not match its {len(zipped)} bytes")


def test_a_truncated_package_is_refused(zipped, tmp_path):
    signed = sign_package(zipped, SECRET)
    assert _refused(signed[:-1], tmp_path / "out") == _expected(
        f"a MAC that does not match its {len(zipped) - 1} bytes")
    assert _refused(signed[:START - 5], tmp_path / "out") == _expected(
        f"a signature header but {START - 5} bytes in all, too few for the 32-byte MAC")


def test_a_missing_mac_is_refused(zipped, tmp_path):
    # a plain zip, as a heron-py before package signing stored it
    assert zipped.startswith(b"PK\x03\x04")
    assert _refused(zipped, tmp_path / "out") == _expected(
        f"no signature header (the package starts with {zipped[:len(SIGNATURE_HEADER)]!r})")


def test_a_package_signed_under_another_secret_is_refused(zipped, tmp_path):
    signed = sign_package(zipped, b"another topology's secret")
    assert _refused(signed, tmp_path / "out") == _expected(f"a MAC that does not match its {len(zipped)} bytes")


def test_executor_refuses_a_replaced_package(zipped, tmp_path):
    home = tmp_path / "home"
    state = LocalFsStateManager(home)
    state.set_secret("wc", SECRET)
    state.set_packing_plan("wc", PackingPlan(2, ()))
    # someone with access to the store swaps in their own code, keeping the old MAC
    signed = sign_package(zipped, SECRET)
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "topo.py").write_text("import os\nos.system('touch /tmp/owned')\n")
    evil = build_package(tmp_path / "evil" / "topo.py", [], [])
    state.set_package("wc", signed[:START] + evil)
    ex = Executor(topology="wc", container=1, home=home, log=logging.getLogger("test"))
    with pytest.raises(SystemExit) as e:
        ex.prepare()
    assert str(e.value) == _expected(f"a MAC that does not match its {len(evil)} bytes")
    assert not (ex.paths.container(1) / "package").exists()
    ex.state.close()


def test_executor_replaces_a_symlink_planted_at_the_secret_file(zipped, tmp_path):
    """Issue 34, low: the secret is written to a new file renamed over the path, so a symlink
    planted there is replaced, never followed (the target stays untouched)."""
    home = tmp_path / "home"
    state = LocalFsStateManager(home)
    state.set_secret("wc", SECRET)
    state.set_packing_plan("wc", PackingPlan(2, ()))
    state.set_package("wc", sign_package(zipped, SECRET))
    ex = Executor(topology="wc", container=1, home=home, log=logging.getLogger("test"))
    workdir = ex.paths.container(1)
    workdir.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("not the secret")
    (workdir / "secret").symlink_to(target)
    with pytest.raises((SystemExit, AssertionError)):
        ex.prepare()  # no topology stored: it stops after writing the secret
    assert target.read_text() == "not the secret"
    assert not (workdir / "secret").is_symlink() and (workdir / "secret").read_bytes() == SECRET
    assert (workdir / "secret").stat().st_mode & 0o777 == 0o600
    ex.state.close()
