"""The files each dataset of the catalog reads from data_dir (auditkit.data.catalog.dataset_files), which the stage
keys digest (auditkit.stages.pipeline.user_inputs)."""
import os

from auditkit.data.catalog import dataset_files
from auditkit.data.torchvision_sets import CIFAR10_FILES, MNIST_FILES


def test_a_torchvision_layout_lists_the_files_its_loader_reads(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in (*MNIST_FILES, "notes.txt"):
        (raw / name).write_bytes(b"")
    assert dataset_files("mnist", tmp_path) == [raw / name for name in MNIST_FILES]
    assert dataset_files("cifar10", tmp_path) == []  # none of its files is there
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    (batches / CIFAR10_FILES[0]).write_bytes(b"")
    assert dataset_files("cifar10", tmp_path) == [batches / CIFAR10_FILES[0]]


def test_embedded_datasets_and_factories_read_no_data_dir(tmp_path):
    assert dataset_files("digits", tmp_path) == dataset_files("my_data.py:make", tmp_path) == []
    assert dataset_files("mnist", None) == []


def test_an_image_folder_lists_its_images_through_links_each_folder_once(tmp_path):
    root = tmp_path / "images"
    (root / "cat").mkdir(parents=True)
    (root / "cat" / "a.PNG").write_bytes(b"")
    (root / "cat" / "readme.txt").write_bytes(b"")
    elsewhere = tmp_path / "dogs"
    elsewhere.mkdir()
    (elsewhere / "b.jpg").write_bytes(b"")
    os.symlink(elsewhere, root / "dog")  # ImageFolder follows it, so its images count
    os.symlink(root, root / "cat" / "loop")  # a loop ends
    assert dataset_files("imagefolder", root) == [root / "cat" / "a.PNG", root / "dog" / "b.jpg"]
