"""Shared test fixtures: tiny datasets in the genuine on-disk formats; the headless-browser report check."""
import importlib.util
import os
import struct
from pathlib import Path

import sys

import numpy as np
import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # workers share the cores: torch's default (one thread per core in every worker) would oversubscribe them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def device(request) -> torch.device:
    """The device a test runs its check on: the CPU, and the GPU where there is one (ids ``cpu`` and ``cuda``: the
    GPU tests are selected with ``-k cuda``; without CUDA they are skipped)."""
    return torch.device(request.param)


@pytest.fixture(params=[pytest.param("cuda", marks=NEEDS_CUDA)])
def cuda(request) -> torch.device:
    """The GPU, for a check that compares it with the CPU (id ``cuda``; skipped without CUDA)."""
    return torch.device(request.param)


@pytest.fixture
def exact_fp32():
    """Float32 matrix products and convolutions in full float32 on a GPU: cuDNN's convolutions default to TF32
    (10 mantissa bits), which a float32 tolerance would have to absorb; restored after the test. Torch >= 2.9 sets
    this with ``fp32_precision = "ieee"`` (reading the legacy ``allow_tf32`` after that raises), older torch with
    ``allow_tf32 = False``."""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(torch.backends.cudnn, "conv"):
        flags = [(torch.backends.cuda.matmul, "fp32_precision", "ieee"),
                 (torch.backends.cudnn.conv, "fp32_precision", "ieee")]
    else:
        flags = [(torch.backends.cuda.matmul, "allow_tf32", False), (torch.backends.cudnn, "allow_tf32", False)]
    before = [getattr(owner, name) for owner, name, _ in flags]
    for owner, name, value in flags:
        setattr(owner, name, value)
    yield
    for (owner, name, _), value in zip(flags, before):
        setattr(owner, name, value)


def write_idx_images(path: Path, images: np.ndarray) -> None:
    """IDX3: big-endian magic 2051 (unsigned byte, 3 dims), N, rows, cols, then the uint8 pixels."""
    path.write_bytes(struct.pack(">IIII", 2051, *images.shape) + images.astype(np.uint8).tobytes())


def write_idx_labels(path: Path, labels: np.ndarray) -> None:
    """IDX1: big-endian magic 2049 (unsigned byte, 1 dim), N, then the uint8 labels."""
    path.write_bytes(struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes())


def write_mnist(root: Path, n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict:
    """Random MNIST-format files in ``root/MNIST/raw`` (as torchvision expects); returns the arrays."""
    rng = np.random.default_rng(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    data = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        images[0, 0, :2] = (0, 255)  # both ends of the pixel range
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        write_idx_images(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx_labels(raw / f"{prefix}-labels-idx1-ubyte", labels)
        data[prefix] = (images, labels)
    return data


@pytest.fixture
def mnist_dir(tmp_path):
    """(root, arrays) of a tiny MNIST: 20 training and 10 test images."""
    return tmp_path, write_mnist(tmp_path)


@pytest.fixture
def make_mnist():
    """The `write_mnist` writer, for tests that need their own sizes."""
    return write_mnist


@pytest.fixture
def report_browser():
    """``check_report_in_browser`` from ``browser.py``; skips without Chromium or Playwright unless ``CI`` is set."""
    browser = _load_browser_module()
    missing = None
    if importlib.util.find_spec("playwright") is None:
        missing = "playwright is not installed (pip install -e '.[test]')"
    elif not browser.CHROMIUM.exists():
        missing = f"no Chromium at {browser.CHROMIUM} (apt-get install chromium)"
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test, but {missing}")
    if missing:
        pytest.skip(missing)
    return browser.check_report_in_browser


@pytest.fixture
def flower_installed():
    """Skips a Flower test without ``auditkit[flower]`` unless ``CI`` is set (CI installs the extra and must run
    them)."""
    from auditkit.flower.install import flower_missing

    missing = flower_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must run the Flower tests, but {missing} is not installed (pip install -e '.[flower]')")
    if missing:
        pytest.skip(f"{missing} is not installed (pip install -e '.[flower]')")


def pytest_collection_modifyitems(items):
    """Flower's Simulation Engine starts a local Ray per run: the ``flower`` tests share one xdist worker."""
    for item in items:
        if item.get_closest_marker("flower"):
            item.add_marker(pytest.mark.xdist_group("ray"))


def _load_browser_module():
    spec = importlib.util.spec_from_file_location("report_browser", Path(__file__).parent / "reports" / "browser.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def registry_unchanged():
    """Mechanisms and round protocols a test registers (plugins loaded in-process) are removed after it, with their
    modules, so that no test sees another's plugins (and a plugin loaded again registers its protocol again)."""
    from auditkit.mechanisms import protocol, registry

    registered, origins = dict(registry._REGISTRY), dict(registry._ORIGIN)
    protocols = dict(protocol._PROTOCOLS)
    yield
    for name, cls in list(registry._REGISTRY.items()):
        if name not in registered:
            sys.modules.pop(cls.__module__, None)
    registry._REGISTRY.clear()
    registry._REGISTRY.update(registered)
    registry._ORIGIN.clear()
    registry._ORIGIN.update(origins)
    protocol._PROTOCOLS.clear()
    protocol._PROTOCOLS.update(protocols)


@pytest.fixture
def umask():
    """``with umask(0o077): ...``: the process umask set for the block, the previous one restored after it (files
    auditkit writes must take the mode 0666 less the umask)."""
    import contextlib

    @contextlib.contextmanager
    def set_umask(mask: int):
        previous = os.umask(mask)
        try:
            yield
        finally:
            os.umask(previous)

    return set_umask


def pytest_addoption(parser):
    parser.addoption("--every-write", action="store_true", default=False,
                     help="tests/auditkit/test_fault_injection.py: kill the audit at every write, not every 4th")


@pytest.fixture
def every_write(request):
    """Whether the kill loop visits every write (``--every-write``) or every 4th and the last (the default, CI's)."""
    return request.config.getoption("--every-write")
