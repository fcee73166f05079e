"""The torch shim's build cache: a build directory someone else could write to is never used (no compilation:
``xpushmem/torch/_build_cache.py`` is loaded by path, without torch)."""

from __future__ import annotations

import importlib.util
import os
import stat
import warnings
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "xpushmem" / "torch" / "_build_cache.py"


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """A fresh copy of the module, with HOME, XDG_CACHE_HOME and TMPDIR inside ``tmp_path``."""
    spec = importlib.util.spec_from_file_location("xpushmem_build_cache_under_test", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    home, xdg, tmp = tmp_path / "home", tmp_path / "xdg", tmp_path / "tmp"
    for d in (home, xdg, tmp):
        d.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("XPUSHMEM_TORCH_BUILD_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    return mod


LIBDIR = Path("/opt/xpushmem/lib")
VERSION = "2.15.0+cpu"


def _private(path: Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def _plant(d: Path) -> Path:
    """A build directory holding someone else's library."""
    d.mkdir(parents=True, exist_ok=True)
    so = d / "xpushmem_torch_shim.so"
    so.write_bytes(b"\x7fELF planted")
    return so


def _chosen(cache) -> tuple[Path, list[str]]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d = cache.build_dir(LIBDIR, VERSION)
    return d, [str(x.message) for x in w]


def test_a_fresh_default_directory_is_created_private_and_used(cache, tmp_path):
    d, warned = _chosen(cache)
    assert d.parent == tmp_path / "xdg" / "xpushmem"
    assert d.name.startswith("torch-2.15.0-cpu-")
    assert _private(d) and _private(d.parent), oct(os.stat(d).st_mode)
    assert warned == []


def test_a_world_writable_build_directory_is_not_used(cache, tmp_path, monkeypatch):
    planted = tmp_path / "shared" / "build"
    so = _plant(planted)
    os.chmod(planted, 0o777)
    monkeypatch.setenv("XPUSHMEM_TORCH_BUILD_DIR", str(planted))
    d, warned = _chosen(cache)
    assert d != planted and not (d / so.name).exists()
    assert _private(d)
    assert len(warned) == 1 and str(planted) in warned[0] and "writable" in warned[0], warned


def test_a_group_writable_xpushmem_parent_is_not_trusted(cache, tmp_path):
    parent = tmp_path / "xdg" / "xpushmem"
    parent.mkdir(mode=0o700)
    os.chmod(parent, 0o770)
    d, warned = _chosen(cache)
    assert parent not in d.parents
    # The private fallback: ~/.cache/xpushmem/<name>.
    assert d.parent == tmp_path / "home" / ".cache" / "xpushmem" and _private(d)
    assert len(warned) == 1 and str(parent) in warned[0], warned


def test_when_home_is_the_refused_place_too_a_private_temporary_directory_is_used(cache, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME")
    parent = tmp_path / "home" / ".cache" / "xpushmem"
    parent.mkdir(parents=True)
    os.chmod(parent, 0o777)
    d, warned = _chosen(cache)
    assert d.parent == tmp_path / "tmp" and _private(d), d
    assert len(warned) == 1


def test_a_symlink_to_a_shared_directory_is_not_used(cache, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    so = _plant(shared)
    os.chmod(shared, 0o777)
    link = tmp_path / "link"
    link.symlink_to(shared)
    monkeypatch.setenv("XPUSHMEM_TORCH_BUILD_DIR", str(link))
    d, _ = _chosen(cache)
    assert d not in (link, shared) and not (d / so.name).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_build_directory_owned_by_another_uid_is_not_used(cache, tmp_path, monkeypatch):
    # The campaign's plant: another user pre-creates the default directory with its own library.
    parent = tmp_path / "xdg" / "xpushmem"
    name = cache.build_dir(LIBDIR, VERSION).name
    planted = parent / name
    for p in (parent, planted):
        p.mkdir(exist_ok=True)
    so = _plant(planted)
    os.chown(planted, 65534, 65534)
    os.chmod(planted, 0o700)
    d, warned = _chosen(cache)
    assert d != planted and not (d / so.name).exists()
    assert len(warned) == 1 and "uid 65534" in warned[0], warned
    # The same with the parent xpushmem/ owned by the other uid.
    os.chown(planted, 0, 0)
    os.chown(parent, 65534, 65534)
    d, warned = _chosen(cache)
    assert parent not in d.parents and len(warned) == 1 and "uid 65534" in warned[0], warned
