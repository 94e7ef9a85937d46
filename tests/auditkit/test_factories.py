"""``auditkit.factories``: the one loader of a user's model and dataset factories; each failure is one line."""
import sys
from importlib import metadata
from pathlib import Path

import pytest

from auditkit.config_bounds import ConfigError
from auditkit.factories import FactoryError, call_factory, factory_module, load_factory, parse_factory


@pytest.mark.parametrize("spec, kind, target, function", [
    ("my_models.py:make_net", "file", "my_models.py", "make_net"),
    ("/abs/dir/my_models.py:make_net", "file", "/abs/dir/my_models.py", "make_net"),
    ("C:\\models\\net.py:make", "file", "C:\\models\\net.py", "make"),
    ("pkg.models:make_net", "module", "pkg.models", "make_net"),
    ("entry:resnet-cifar", "entry", "resnet-cifar", None),
])
def test_the_three_forms_parse_without_importing(spec, kind, target, function):
    factory = parse_factory(spec)
    assert (factory.kind, factory.target, factory.function) == (kind, target, function)


@pytest.mark.parametrize("spec", ["cnn", "my_models.py", "my models.py:", "pkg.models:make-net", "entry:", 3, None])
def test_what_is_no_factory_parses_to_none(spec):
    assert parse_factory(spec) is None


def test_a_file_factory_is_imported_once_and_its_function_returned(tmp_path):
    path = tmp_path / "fac_once.py"
    path.write_text("CALLS = []\n\ndef make(**kw):\n    CALLS.append(kw)\n    return 42\n")
    try:
        fn = load_factory(f"{path}:make", "training.model", "auditkit.models")
        assert call_factory(fn, "x", "training.model", a=1) == 42
        assert load_factory(f"{path}:make", "training.model", "auditkit.models") is fn
        assert sys.modules["fac_once"].CALLS == [{"a": 1}]
    finally:
        sys.modules.pop("fac_once", None)


def test_each_failure_is_one_line_naming_the_key_and_the_factory(tmp_path):
    where, group = "training.model", "auditkit.models"
    with pytest.raises(FactoryError, match=r"^training.model: factory '.*nowhere.py:make' failed to load: no such "
                                           r"file$"):
        load_factory(f"{tmp_path}/nowhere.py:make", where, group)
    (tmp_path / "fac_nofn.py").write_text("def other():\n    pass\n")
    with pytest.raises(FactoryError, match=r"failed to load: fac_nofn has no function 'make'$"):
        load_factory(f"{tmp_path}/fac_nofn.py:make", where, group)
    (tmp_path / "fac_broken.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(FactoryError, match=r"failed to load: import failed: ModuleNotFoundError: No module named "
                                           r"'not_a_module_anywhere'$"):
        load_factory(f"{tmp_path}/fac_broken.py:make", where, group)
    with pytest.raises(FactoryError, match=r"^data.dataset: factory 'no_such_pkg.data:make' failed to load: import "
                                           r"failed: ModuleNotFoundError"):
        load_factory("no_such_pkg.data:make", "data.dataset", "auditkit.datasets")
    with pytest.raises(FactoryError, match=r"failed to load: no entry point 'nope' in group 'auditkit.models' is "
                                           r"installed$"):
        load_factory("entry:nope", where, group)
    with pytest.raises(FactoryError, match=r"^training.model: factory 'f' raised ZeroDivisionError: division by zero$"):
        call_factory(lambda: 1 / 0, "f", where)
    assert issubclass(FactoryError, ConfigError)  # the command line shows it as the config's one line
    for name in ("fac_nofn", "fac_broken"):
        sys.modules.pop(name, None)


def test_an_entry_point_is_loaded_from_its_group(monkeypatch):
    point = metadata.EntryPoint(name="json-loads", value="json:loads", group="auditkit.models")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [point] if group == "auditkit.models" else [])
    import json
    assert load_factory("entry:json-loads", "training.model", "auditkit.models") is json.loads


def test_an_edited_factory_file_is_imported_again_under_its_name(tmp_path):
    path = tmp_path / "fac_edited.py"
    path.write_text("def make(**kw):\n    return 1\n")
    try:
        first = load_factory(f"{path}:make", "training.model", "auditkit.models")
        path.write_text("def make(**kw):\n    return 2\n")  # the code that runs is the file's, as its digest says
        second = load_factory(f"{path}:make", "training.model", "auditkit.models")
        assert (first(), second()) == (1, 2) and second.__module__ == "fac_edited"
        assert load_factory(f"{path}:make", "training.model", "auditkit.models") is second
    finally:
        sys.modules.pop("fac_edited", None)


def test_a_factorys_module_is_located_by_its_form(tmp_path, monkeypatch):
    path = tmp_path / "fac_located.py"
    assert factory_module(f"{path}:make", "auditkit.models") == ("fac_located", path)  # not imported: not needed
    import json
    assert factory_module("json:loads", "auditkit.models") == ("json", Path(json.__file__))
    point = metadata.EntryPoint(name="json-loads", value="json:loads", group="auditkit.models")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [point] if group == "auditkit.models" else [])
    assert factory_module("entry:json-loads", "auditkit.models") == ("json", Path(json.__file__))
    assert factory_module("no_such_module_54:make", "auditkit.models") is None
    assert factory_module("cnn", "auditkit.models") is None
