"""Where ``xpushmem.torch`` builds its C++ shim: a directory only the current user can write to.

A build directory is trusted (its ``.so`` is loaded into this process) only if it, and for the default location
its parent ``xpushmem/`` too, is owned by the effective uid and not writable by group or others, symlinks
included. Missing directories are created with mode 0700. A directory that fails the check is never used:
the build goes to ``~/.cache/xpushmem/<name>`` when that one passes, else to a fresh private temporary directory
(``tempfile.mkdtemp``, rebuilt per process), with one warning naming the refused directory and why. This module
imports nothing but the standard library, so that its logic is tested without torch or a compiler.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import warnings
from pathlib import Path

_warned: set[str] = set()


def refusal(path: Path) -> str | None:
    """Why ``path`` (an existing directory) cannot be trusted, or ``None`` when it can."""
    uid = os.geteuid()
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as e:
        return f"cannot inspect it ({e})"
    if stat.S_ISLNK(link.st_mode) and link.st_uid != uid:
        return f"it is a symlink owned by uid {link.st_uid}, not {uid}"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != uid:
        return f"it is owned by uid {st.st_uid}, not {uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _make_trusted(path: Path, checked: list[Path]) -> str | None:
    """Create ``path`` (mode 0700, parents too) when missing; why one of ``checked`` is not trusted, or ``None``."""
    try:
        # Every directory made here gets 0700 (Path.mkdir gives missing parents the umask's default instead).
        for p in [*reversed(path.parents), path]:
            if not p.exists():
                p.mkdir(mode=0o700, exist_ok=True)
    except OSError as e:
        return f"{path}: cannot create it ({e})"
    for p in checked:
        why = refusal(p)
        if why:
            return f"{p}: {why}"
    return None


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=3)


def build_dir(libdir: Path, torch_version: str) -> Path:
    """The shim's build directory for ``libdir``'s library and this torch: ``$XPUSHMEM_TORCH_BUILD_DIR``, else
    ``${XDG_CACHE_HOME:-~/.cache}/xpushmem/torch-<version>-<sha1(libdir)[:10]>``; created and checked as the
    module doc says, with a private fallback."""
    # One build per torch version and library location (the shim is linked with an rpath to it).
    tag = hashlib.sha1(str(libdir).encode()).hexdigest()[:10]
    name = f"torch-{torch_version.replace('+', '-')}-{tag}"
    env = os.environ.get("XPUSHMEM_TORCH_BUILD_DIR")
    home_cache = Path.home() / ".cache" / "xpushmem"
    if env:
        wanted, checked = Path(env), [Path(env)]
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xpushmem"
        wanted, checked = cache / name, [cache, cache / name]
    why = _make_trusted(wanted, checked)
    if why is None:
        return wanted
    fallback = home_cache / name
    if fallback != wanted and _make_trusted(fallback, [home_cache, fallback]) is None:
        chosen = fallback
    else:
        chosen = Path(tempfile.mkdtemp(prefix="xpushmem-torch-"))
    _warn_once(
        f"xpushmem.torch: not using the build directory {wanted}: {why}; building in {chosen} instead "
        "(a shared or foreign build directory could hold a planted library)"
    )
    return chosen
