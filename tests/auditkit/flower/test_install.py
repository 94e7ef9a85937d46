"""Without the ``auditkit[flower]`` extra: the core works, asking for Flower is one line naming the install.

Flower is hidden from a fresh interpreter the way Python reports an absent package (``sys.modules[name] = None``
makes ``importlib.util.find_spec`` return None and ``import`` fail), so these run whether or not it is installed.
"""
import subprocess
import sys

HIDE_FLOWER = "import sys; sys.modules['flwr'] = None; sys.modules['ray'] = None; "


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE_FLOWER + code, *args], capture_output=True, text=True,
                          timeout=300)


def test_backend_flower_without_the_extra_is_one_line_exit_2_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = _python("from auditkit.cli.app import main; main(sys.argv[1:])", "train", "--backend", "flower",
                     "--mechanism", "none", "--rounds", "1", "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: training.backend = 'flower' needs Flower (flwr): pip install 'auditkit[flower]'"]
    assert not out.exists()


def test_public_api_without_the_extra_names_the_install():
    result = _python("from auditkit.flower import mechanism_mod")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "auditkit.flower.install.FlowerNotInstalled: auditkit.flower needs Flower (flwr): pip install "
        "'auditkit[flower]'")


def test_the_builtin_backend_needs_no_flower(tmp_path):
    out = tmp_path / "out"
    result = _python("from auditkit.cli.app import main; main(sys.argv[1:])", "train", "--mechanism", "none",
                     "--dataset", "digits", "--model", "linear", "--rounds", "1", "--clients", "2", "--tau", "1",
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert (out / "results.json").is_file()
