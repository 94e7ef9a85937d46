"""The digests of the user's own inputs (auditkit.input_fingerprint): sources with the modules they import from the
user's folders, file listings with contents, and the digest cache that keeps large folders cheap."""
import hashlib
import importlib.util
import os
import sys
import time

import pytest

from auditkit import results
from auditkit.input_fingerprint import (RACY_SECONDS, DigestCache, file_sha256, files_digest, plugin_digests,
                                        source_digests)

OLD = time.time() - 3600  # an hour ago: settled, past RACY_SECONDS


def _write(path, data, when=OLD):
    """``data`` into ``path``, its mtime set to ``when``."""
    path.write_bytes(data)
    os.utime(path, (when, when))
    return path


def test_a_file_digest_is_its_sha256_read_in_chunks(tmp_path):
    data = os.urandom(3 * 2**20 + 17)  # over a chunk, not a multiple of one
    (tmp_path / "big.bin").write_bytes(data)
    assert file_sha256(tmp_path / "big.bin") == hashlib.sha256(data).hexdigest()


def test_the_cache_reuses_an_unchanged_file_and_rehashes_a_touched_one(tmp_path):
    big = _write(tmp_path / "big.bin", os.urandom(4 * 2**20))
    first = DigestCache()
    digest = first.digest(big)
    assert first.reads == 1 and first.changed
    again = DigestCache(first.dumps())  # the next audit, reading the cache file the first wrote
    assert again.digest(big) == digest and again.reads == 0 and not again.changed
    os.utime(big, (OLD + 60, OLD + 60))  # touched: same content and size, another mtime
    touched = DigestCache(first.dumps())
    assert touched.digest(big) == digest and touched.reads == 1 and touched.changed


def test_a_changed_file_of_the_same_size_and_mtime_is_rehashed_through_its_ctime(tmp_path):
    file = _write(tmp_path / "a.bin", b"a" * 1000)
    cache = DigestCache()
    before = cache.digest(file)
    time.sleep(0.05)  # past the clock's tick
    _write(file, b"b" * 1000)  # the mtime set back as it was; the ctime moved on
    later = DigestCache(cache.dumps())
    assert later.digest(file) != before and later.reads == 1


def test_a_file_changed_just_before_it_was_hashed_is_not_cached(tmp_path):
    fresh = tmp_path / "fresh.bin"
    fresh.write_bytes(b"x" * 100)  # mtime now: within RACY_SECONDS, a change in the same tick would go unseen
    cache = DigestCache()
    cache.digest(fresh)
    later = DigestCache(cache.dumps())
    later.digest(fresh)
    assert not cache.changed and later.reads == 1 and RACY_SECONDS >= 1


@pytest.mark.parametrize("stored", [b"not json", b"[]", b'{"version": 99, "files": {}}',
                                    b'{"version": 1, "files": {"/x": [1, 2, 3, 4, 5, "zz"]}}', None])
def test_a_cache_file_of_another_format_is_an_empty_cache(tmp_path, stored):
    file = _write(tmp_path / "a.bin", b"a")
    cache = DigestCache(stored)
    cache.digest(file)
    assert cache.reads == 1


def test_a_listing_digest_follows_contents_names_and_sizes(tmp_path):
    root = tmp_path / "images"
    (root / "cat").mkdir(parents=True)
    (root / "dog").mkdir()
    for name in ("cat/a.bmp", "cat/b.bmp", "dog/c.bmp"):
        (root / name).write_bytes(bytes(64))
    files = lambda: sorted(root.rglob("*.bmp"))  # noqa: E731
    base = files_digest(root, files(), DigestCache())
    assert files_digest(root, reversed(files()), DigestCache()) == base  # order-free
    (root / "cat/a.bmp").write_bytes(bytes(63) + b"\x01")  # same size, one byte changed
    changed = files_digest(root, files(), DigestCache())
    (root / "cat/a.bmp").write_bytes(bytes(64))
    assert files_digest(root, files(), DigestCache()) == base
    (root / "cat/a.bmp").rename(root / "dog/a.bmp")  # moved to another class: same bytes, another label
    moved = files_digest(root, files(), DigestCache())
    assert len({base, changed, moved}) == 3


def _module_tree(tmp_path):
    """A factory file importing a user's module (itself importing another, in a function) and libraries."""
    (tmp_path / "factory.py").write_text("import os\nimport torch\nimport helpers\nfrom pkg import sub\n"
                                         "import auditkit.data\n\ndef make():\n    return helpers.W\n")
    (tmp_path / "helpers.py").write_text("W = 1\n\ndef later():\n    import deeper\n")
    (tmp_path / "deeper.py").write_text("X = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub.py").write_text("from . import sibling\n")
    (tmp_path / "pkg" / "sibling.py").write_text("Y = 1\n")
    return tmp_path / "factory.py"


def test_a_sources_digest_covers_the_users_modules_it_imports_and_no_library(tmp_path, monkeypatch):
    factory = _module_tree(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    digests = source_digests("the model factory factory.py:make", factory, "factory")
    assert list(digests) == ["the model factory factory.py:make"] + [
        f"{name}, a module the model factory factory.py:make imports"
        for name in ("deeper", "helpers", "pkg", "pkg.sibling", "pkg.sub")]  # not os, torch, auditkit
    (tmp_path / "pkg" / "sibling.py").write_text("Y = 2\n")  # two imports away, relative
    after = source_digests("the model factory factory.py:make", factory, "factory")
    assert [name for name in digests if digests[name] != after[name]] == [
        "pkg.sibling, a module the model factory factory.py:make imports"]


def test_an_import_the_path_lacks_is_found_in_the_importing_files_folder(tmp_path):
    factory = _module_tree(tmp_path)  # tmp_path not on sys.path: helpers is found beside the factory
    assert "helpers, a module f imports" in source_digests("f", factory, "factory")


def test_the_code_fingerprint_follows_a_module_a_plugin_imports(tmp_path, monkeypatch):
    (tmp_path / "plug_helper.py").write_text("SCALE = 1\n")
    plugin = tmp_path / "plug.py"
    plugin.write_text("import plug_helper\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = results.code_fingerprint([str(plugin)])
    names = list(plugin_digests([str(plugin)]))
    assert names == [f"the plugin {plugin}", f"plug_helper, a module the plugin {plugin} imports"]
    (tmp_path / "plug_helper.py").write_text("SCALE = 2\n")
    assert results.code_fingerprint([str(plugin)]) != first != results.code_fingerprint()


def test_a_plugin_module_is_digested_from_the_file_it_was_imported_from(tmp_path, monkeypatch):
    (tmp_path / "named_plugin.py").write_text("x = 1\n")
    spec = importlib.util.spec_from_file_location("named_plugin", tmp_path / "named_plugin.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "named_plugin", module)
    spec.loader.exec_module(module)
    assert plugin_digests(["named_plugin"]) == {
        "the plugin named_plugin": "sha256:" + hashlib.sha256(b"x = 1\n").hexdigest()}
