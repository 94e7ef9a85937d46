"""The stage store (auditkit.stage_store): strict JSON stage files that load back the same floats, stable keys,
atomic replacement whose files follow the umask."""
import json
import math
import stat

import pytest
import torch

from auditkit.folder import Folder, temporary_name
from auditkit.output_folder import Mode, OutputFolder, Workspace, replace_atomically
from auditkit.stage_store import StageStore, stage_key


def store_of(root, *, resume):
    """A stage store over ``root``, its folder held open for the test."""
    return StageStore(Workspace(Folder.open(root, create=True)), resume=resume)


def strict_loads(text):
    """json.loads refusing NaN / Infinity / -Infinity, as RFC 8259 (and JavaScript's JSON.parse) does."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


RESULT = {"training": {"rounds": [{"round": 1, "snr_db": math.inf, "test_loss": math.nan}],
                       "final": {"snr_db": -math.inf, "test_accuracy": 0.5}},
          "curve": [1.0, math.inf, (math.nan, 2)], "label": "s00"}


def test_a_stage_file_is_strict_json_and_loads_back_the_same_floats(tmp_path):
    store = store_of(tmp_path, resume=True)
    store.save("s00", "train", "k1", RESULT, seconds=1.5)
    stored = strict_loads((tmp_path / "stages" / "s00" / "train.json").read_text())
    assert stored["result"]["training"]["rounds"][0] == {"round": 1, "snr_db": "Infinity", "test_loss": "NaN"}
    assert stored["result"]["curve"] == [1.0, "Infinity", ["NaN", 2]]
    loaded, note = store.load("s00", "train", "k1")
    assert note is None
    rounds, final = loaded["training"]["rounds"][0], loaded["training"]["final"]
    assert rounds["snr_db"] == math.inf and math.isnan(rounds["test_loss"]) and final["snr_db"] == -math.inf
    assert loaded["curve"][:2] == [1.0, math.inf] and math.isnan(loaded["curve"][2][0]) and loaded["curve"][2][1] == 2
    assert loaded["label"] == "s00" and final["test_accuracy"] == 0.5
    assert store.load("s00", "train", "other key") == (None, None)  # inputs changed: recomputed, nothing to say
    assert store_of(tmp_path, resume=False).load("s00", "train", "k1") == (None, None)
    assert store.seconds("s00", "train") == 1.5


def test_stage_files_decode_every_non_finite_string_they_hold(tmp_path):
    """The documented rule: stage files are internal and schema-less, so any value "NaN" / "Infinity" /
    "-Infinity" loads as the float; other strings stay strings."""
    store = store_of(tmp_path, resume=True)
    store.save("s00", "probe", "k", {"note": "NaN", "values": ["-Infinity", "Inf", "nan"]}, seconds=0.0)
    loaded, _ = store.load("s00", "probe", "k")
    assert math.isnan(loaded["note"]) and loaded["values"][0] == -math.inf and loaded["values"][1:] == ["Inf", "nan"]


def test_a_stage_file_written_before_with_bare_infinity_still_loads(tmp_path):
    path = tmp_path / "stages" / "s00" / "train.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"stage": "train", "key": "k", "seconds": 2.0, "result": {"snr_db": Infinity, "loss": NaN}}')
    loaded, _ = store_of(tmp_path, resume=True).load("s00", "train", "k")
    assert loaded["snr_db"] == math.inf and math.isnan(loaded["loss"])


def test_stage_keys_are_unchanged_and_take_non_finite_inputs():
    # the keys auditkit computed before stage files became strict JSON: stored stages still resume
    assert stage_key({"auditkit": "1.0", "stage": "train", "inputs": {"lr": 0.01, "rounds": [1, 3], "name": "sdq"}}) \
        == "3a00fa3696abe67e7ae74a2abdee6fbc78295191aef94ef19f0799a67b414d82"
    assert stage_key({"x": math.inf}) == "504a7fad8d7687a0ca0c9eace25c99c63e8e3cf1ad8f4945644c781e4605c02d"
    assert stage_key({"x": math.nan}) == stage_key({"x": math.nan})
    assert len({stage_key({"x": v}) for v in (math.inf, -math.inf, math.nan, "Infinity", "-Infinity", "NaN")}) == 6


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_follow_the_umask(umask, tmp_path, mask, expected):
    with umask(mask):
        text = replace_atomically(tmp_path / "plain.txt", lambda file: file.write(b"x"))
        store = store_of(tmp_path, resume=False)
        store.save("s00", "train", "k", {"a": 1}, seconds=0.1)
        store.save_tensors("s00", "train", "k", {"w": torch.ones(2)})
    for path in (text, tmp_path / "stages" / "s00" / "train.json", tmp_path / "stages" / "s00" / "train.pt"):
        assert mode(path) == expected, (path, oct(mode(path)))
    assert torch.equal(store_of(tmp_path, resume=True).load_tensors("s00", "train", "k")["w"], torch.ones(2))


def test_a_replaced_file_takes_the_mode_of_a_new_one(umask, tmp_path):
    target = tmp_path / "results.json"
    target.write_text("old")
    target.chmod(0o600)  # as written before, by tempfile.mkstemp
    with umask(0o022):
        replace_atomically(target, lambda file: file.write(b"new"))
    assert target.read_text() == "new" and mode(target) == 0o644


def test_the_temporary_file_is_removed_when_writing_fails_and_a_full_disk_names_the_file(tmp_path):
    target = tmp_path / "figures" / "grid.png"

    def fails(file):
        file.write(b"half")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file data/0: "
                           "file write failed")  # torch.save's error on a full disk

    with pytest.raises(OSError, match=r"write failed \(\[enforce fail .* file write failed\)") as failed:
        replace_atomically(target, fails)
    assert failed.value.filename.startswith(str(target.parent / ".grid."))
    with pytest.raises(RuntimeError, match="a bug"):  # anything else keeps its type (and traceback)
        replace_atomically(target, lambda file: (_ for _ in ()).throw(RuntimeError("a bug")))
    assert list(target.parent.iterdir()) == []  # neither the target nor the temporary file
    replace_atomically(target, lambda file: file.write(b"png"))
    replace_atomically(target, lambda file: file.write(b"png2"))
    assert target.read_bytes() == b"png2" and list(target.parent.iterdir()) == [target]


def test_a_temporary_file_left_by_a_killed_run_is_cleared(tmp_path):
    store_of(tmp_path, resume=False).save("s00", "train", "k", {}, seconds=0.0)
    (tmp_path / "stages" / "s00" / temporary_name("account.json")).write_text("{")  # killed before its rename
    with OutputFolder(tmp_path, Mode.RESUME).open():
        pass
    assert sorted(p.name for p in (tmp_path / "stages" / "s00").iterdir()) == ["train.json"]


def _stored_with_tensors(root, key="k"):
    store = store_of(root, resume=False)
    store.save_tensors("s00", "train", key, {"view": torch.arange(4.0)})
    store.save("s00", "train", key, {"a": 1}, seconds=0.0)
    return root / "stages" / "s00" / "train.pt"


def test_stage_tensors_are_bound_to_the_stage_key(tmp_path):
    _stored_with_tensors(tmp_path)
    assert store_of(tmp_path, resume=True).load("s00", "train", "k") == ({"a": 1}, None)
    other = tmp_path / "other"
    foreign = _stored_with_tensors(other, key="another run's key")
    (tmp_path / "stages" / "s00" / "train.pt").write_bytes(foreign.read_bytes())  # another run's tensors
    assert store_of(tmp_path, resume=True).load("s00", "train", "k") == (
        None, "stages/s00/train.pt was written for other inputs (its key differs); recomputing train")


@pytest.mark.parametrize(("damage", "why"), [
    (lambda pt: pt.unlink(), "is missing"),
    (lambda pt: pt.write_bytes(pt.read_bytes()[: len(pt.read_bytes()) // 2]), "is damaged"),
    (lambda pt: pt.write_bytes(b""), "is damaged"),
    (lambda pt: torch.save({"w": torch.ones(1)}, pt), "was written for other inputs"),  # the format before keys
])
def test_missing_damaged_or_unkeyed_stage_tensors_are_recomputed_with_a_note(tmp_path, damage, why):
    damage(_stored_with_tensors(tmp_path))
    result, note = store_of(tmp_path, resume=True).load("s00", "train", "k")
    assert result is None and note.startswith(f"stages/s00/train.pt {why}") and note.endswith("; recomputing train")


@pytest.mark.parametrize("text", ["{", "[]", '{"key": "k"}', "null", "[" * 100000])
def test_an_unreadable_stage_file_is_recomputed_with_a_note(tmp_path, text):
    path = tmp_path / "stages" / "s00" / "account.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert store_of(tmp_path, resume=True).load("s00", "account", "k") == (
        None, "stages/s00/account.json is unreadable; recomputing account")


def test_a_stage_whose_named_inputs_changed_is_recomputed_with_a_note_naming_them(tmp_path):
    inputs = {"the model factory f.py:make": "sha256:1", "h, a module the model factory f.py:make imports": "sha256:2"}
    store_of(tmp_path, resume=False).save("s00", "train", "k1", {"x": 1}, 0.5, inputs)
    resumed = store_of(tmp_path, resume=True)
    assert resumed.load("s00", "train", "k1", inputs) == ({"x": 1}, None)
    edited = {**inputs, "the model factory f.py:make": "sha256:3", "the image folder photos": "sha256:4"}
    assert resumed.load("s00", "train", "k2", edited) == (
        None, "recomputing train: the model factory f.py:make, the image folder photos changed")
    assert resumed.load("s00", "train", "k2", inputs) == (None, None)  # the key changed with the config alone
