"""A recording may come from anyone (issue 39): reading one runs no code and trusts no type. Each malformed file is a
RecordingError of one line naming the file and the field, never a traceback (no Flower needed)."""
import json

import pytest
import torch

from auditkit.flower.recording import RecordingError, load_recording, write_manifest, write_server_round, write_truth

P = 6  # values per update


def recording(root):
    """A valid recording of round 1 (clients 0 and 1, both with ground truth) and its unrecorded round 2."""
    rounds = [{"round": 1, "clients": [0, 1], "bits": [64, 64], "lr": 0.1, "test_loss": "NaN", "coordinates": P,
               "stats": {"noise_std": 0.5}},
              {"round": 2, "clients": [1], "bits": [64], "train_loss": 1.5}]
    write_manifest(root, {"mechanism": {"name": "none"}}, rounds)
    write_server_round(root, 1, clients=[0, 1], global_before=torch.zeros(P), server=torch.ones(2, P), lr=0.1)
    for client in (0, 1):
        write_truth(root, 1, client, update=torch.ones(P), images=torch.zeros(2, 1, 4, 4))
    return root


def edit_manifest(root, edit):
    manifest = json.loads((root / "recording.json").read_text())
    edit(manifest)
    (root / "recording.json").write_text(json.dumps(manifest))


def edit_file(root, name, edit):
    value = torch.load(root / name, weights_only=True)
    edit(value)
    torch.save(value, root / name)


def refused(root, message, read=lambda r: None):
    """Loading ``root`` (and ``read``-ing from it) raises one line that ends with ``message``."""
    with pytest.raises(RecordingError) as err:
        read(load_recording(root))
    assert str(err.value) == f"--recorded {str(root)!r}: {message}"


def test_a_valid_recording_reads_with_its_metrics_decoded(tmp_path):
    loaded = load_recording(recording(tmp_path))
    first = loaded.rounds[0]
    assert first["test_loss"] != first["test_loss"] and first["stats"] == {"noise_std": 0.5}  # "NaN" -> nan
    assert loaded.server_round(1)["server"].shape == (2, P) and loaded.truth(1, 0)["images"].shape == (2, 1, 4, 4)
    assert loaded.where(1) == f"--recorded {str(tmp_path)!r}: server/round-0001.pt"


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["rounds"][0].update(bits="64"),
     "recording.json: rounds[0].bits must be a list of integers >= 0, got '64'"),
    (lambda m: m["rounds"].__setitem__(1, [2, [1], [64]]), "recording.json: rounds[1] must be an object, got list"),
    (lambda m: m["rounds"][0].update(round=True), "recording.json: rounds[0].round must be an integer >= 1, got True"),
    (lambda m: m["rounds"][0].update(clients=[0, -1]),
     "recording.json: rounds[0].clients must be a list of integers >= 0, got [0, -1]"),
    (lambda m: m["rounds"][1].update(train_loss="low"),
     "recording.json: rounds[1].train_loss must be a number, got 'low'"),
    (lambda m: m["rounds"][0].update(coordinates=6.5),
     "recording.json: rounds[0].coordinates must be an integer >= 0, got 6.5"),
    (lambda m: m["rounds"][0].update(stats={"noise_std": [1]}),
     "recording.json: rounds[0].stats must be an object of numbers, got {'noise_std': [1]}"),
    (lambda m: m.update(rounds={"1": {}}), "recording.json: rounds must be a list, got {'1': {}}"),
    (lambda m: m.update(config=["mechanism"]), "recording.json: config must be an object, got ['mechanism']"),
])
def test_a_round_entry_or_config_of_the_wrong_type_is_one_line(tmp_path, edit, message):
    edit_manifest(recording(tmp_path), edit)
    refused(tmp_path, message)


@pytest.mark.parametrize("text, message", [
    ("{not json", "recording.json is not valid JSON (Expecting property name enclosed in double quotes at line 1, "
                  "column 2)"),
    ("[1, 2]", "recording.json must hold a JSON object, got an array"),
    ('"recording"', "recording.json must hold a JSON object, got 'recording'"),
    ("[" * 100_000 + "]" * 100_000, "recording.json is nested deeper than the 100-level limit"),  # RecursionError
    ('{"format": "auditkit-flower-recording", "version": 1, "config": {"a": ' + "[" * 150 + "]" * 150 + "}}",
     "recording.json is nested deeper than the 100-level limit"),  # parsed, but deeper than any recording
    (b"\xff\xfe{}", "recording.json is not valid JSON (not UTF-8 text)"),
])
def test_a_manifest_that_is_not_a_json_object_is_one_line(tmp_path, text, message):
    recording(tmp_path)
    manifest = tmp_path / "recording.json"
    manifest.write_bytes(text) if isinstance(text, bytes) else manifest.write_text(text)
    refused(tmp_path, message)


def test_a_server_file_not_named_as_a_round_is_one_line(tmp_path):
    """int("abc") was a ValueError traceback."""
    recording(tmp_path)
    (tmp_path / "server" / "round-abc.pt").write_bytes((tmp_path / "server" / "round-0001.pt").read_bytes())
    refused(tmp_path, "server/round-abc.pt is not named as a recorded round (server/round-NNNN.pt, e.g. round-0001.pt)")
    (tmp_path / "server" / "round-abc.pt").rename(tmp_path / "server" / "round-1.pt")  # round 1 is round-0001.pt
    refused(tmp_path, "server/round-1.pt is not named as a recorded round (server/round-NNNN.pt, e.g. round-0001.pt)")


def test_a_file_that_is_not_a_torch_file_or_is_cut_short_is_one_line(tmp_path):
    recording(tmp_path)
    server = tmp_path / "server" / "round-0001.pt"
    whole = server.read_bytes()
    for damaged in (b"hello", whole[:len(whole) // 2], whole[:-30]):
        server.write_bytes(damaged)
        refused(tmp_path, "server/round-0001.pt is not a whole torch file (torch.save writes a zip archive, and this "
                          "is not one)", lambda r: r.server_round(1))


def test_a_file_that_would_run_code_to_load_is_refused_and_its_code_never_runs(tmp_path):
    recording(tmp_path)
    ran = tmp_path / "ran"
    torch.save({"update": Exploit(str(ran))}, tmp_path / "truth" / "round-0001-client-0.pt")
    refused(tmp_path, "truth/round-0001-client-0.pt holds objects other than tensors and plain data, which auditkit "
                      "never loads (they would run code)", lambda r: r.truth(1, 0))
    assert not ran.exists()


class Exploit:
    """Pickled as a call of ``open(path, "w")``: a file appears if unpickling runs it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("name, edit, message", [
    ("server/round-0001.pt", lambda v: v.update(server=v["server"].double()),
     "server/round-0001.pt: server must be a dense float32 tensor of 2 dimensions, got torch.float64 of shape (2, 6)"),
    ("server/round-0001.pt", lambda v: v.update(server=v["server"][0]),
     "server/round-0001.pt: server must be a dense float32 tensor of 2 dimensions, got torch.float32 of shape (6,)"),
    ("server/round-0001.pt", lambda v: v.update(server=torch.ones(2, P + 1)),
     "server/round-0001.pt: server must hold one row of 6 values (global_before's) per client (2), got shape (2, 7)"),
    ("server/round-0001.pt", lambda v: v.update(global_before=v["global_before"].to_sparse()),
     "server/round-0001.pt: global_before must be a dense float32 tensor of 1 dimension, got torch.float32 of shape "
     "(6,) (torch.sparse_coo)"),
    ("server/round-0001.pt", lambda v: v.update(global_before=[0.0] * P),
     "server/round-0001.pt: global_before must be a tensor, got list"),
    ("server/round-0001.pt", lambda v: v.update(aggregate=torch.ones(P - 1)),
     "server/round-0001.pt: aggregate must hold 6 values (global_before's), got 5"),
    ("server/round-0001.pt", lambda v: v.update(round=2),
     "server/round-0001.pt: round must be 1, the file's round, got 2"),
    ("server/round-0001.pt", lambda v: v.update(clients=[0, 0]),
     "server/round-0001.pt: clients must be a list of distinct integers >= 0, got [0, 0]"),
    ("server/round-0001.pt", lambda v: v.update(lr="0.1"), "server/round-0001.pt: lr must be a number, got '0.1'"),
    ("truth/round-0001-client-1.pt", lambda v: v.update(images=torch.zeros(2, 16, dtype=torch.uint8)),
     "truth/round-0001-client-1.pt: images must be a dense float32 tensor of 4 dimensions, got torch.uint8 of shape "
     "(2, 16)"),
])
def test_a_tensor_of_the_wrong_dtype_or_shape_is_one_line_naming_file_and_field(tmp_path, name, edit, message):
    edit_file(recording(tmp_path), name, edit)
    refused(tmp_path, message, lambda r: (r.server_round(1), r.truth(1, 1)))


def test_a_view_that_is_not_a_dict_is_one_line(tmp_path):
    recording(tmp_path)
    torch.save(torch.ones(3), tmp_path / "server" / "round-0001.pt")
    refused(tmp_path, "server/round-0001.pt must hold a dict of the round's view, got Tensor",
            lambda r: r.server_round(1))


def test_a_torch_file_whose_contents_are_damaged_is_one_line(tmp_path):
    """A whole zip archive whose pickled data is not a pickle: refused by the weights-only reader, said as damage."""
    recording(tmp_path)
    server = tmp_path / "server" / "round-0001.pt"
    data = bytearray(server.read_bytes())
    start = data.index(b"data.pkl") + len(b"data.pkl")
    data[start + 40:start + 200] = bytes(160)  # inside the pickle of data.pkl, before the tensors' records
    server.write_bytes(bytes(data))
    refused(tmp_path, "server/round-0001.pt is not a readable torch file (its pickled data is damaged)",
            lambda r: r.server_round(1))
