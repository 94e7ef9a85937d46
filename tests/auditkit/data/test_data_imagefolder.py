"""The imagefolder dataset: genuine PNG, JPEG and TIFF files in torchvision's ImageFolder layout, read through
torchvision's ImageFolder; both split modes, the seeded split, the image size, each image at its true bit depth
(16-bit greyscale, float), and every one-line error."""
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms

from auditkit.data import DataNotFoundError, dataset_available, load_dataset
from auditkit.data import imagefolder


def _write(root: Path, counts: dict[str, int], *, seed: int = 0) -> dict[str, list[Path]]:
    """``counts[c]`` images per class folder ``root/c``: RGB PNGs of varied sizes, and a greyscale JPEG per class."""
    rng = np.random.default_rng(seed)
    written = {}
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        written[name] = []
        for i in range(count):
            path = root / name / f"{i:03d}.png"
            if i == 1:  # one greyscale JPEG: converted to RGB
                path = path.with_suffix(".jpg")
                Image.fromarray(rng.integers(0, 256, (24, 40), dtype=np.uint8), mode="L").save(path)
            else:
                Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)).save(path)
            written[name].append(path)
    return written


def _load(root, *, seed=0, **options):
    return load_dataset("imagefolder", data_dir=root, seed=seed, **options)


def test_a_folder_is_split_per_class_with_the_test_fraction(tmp_path):
    _write(tmp_path, {"cat": 10, "dog": 10, "emu": 5})
    dataset = _load(tmp_path)
    assert dataset.name == "imagefolder" and dataset.num_classes == 3 and dataset.classes == ("cat", "dog", "emu")
    assert dataset.input_shape == (3, 32, 32)
    assert dataset.train.x.shape == (20, 3, 32, 32) and dataset.test.x.shape == (5, 3, 32, 32)
    assert dataset.train.x.dtype == torch.float32 and dataset.train.y.dtype == torch.int64
    assert torch.bincount(dataset.test.y).tolist() == [2, 2, 1]  # round(0.2 * n_c) of each class
    assert 0 <= dataset.train.x.min() and dataset.train.x.max() <= 1
    assert "ImageFolder" in dataset.source and "split 0.8 / 0.2 per class, seeded" in dataset.source
    assert _load(tmp_path, test_fraction=0.5).test.y.bincount().tolist() == [5, 5, 2]
    assert dataset_available("imagefolder", tmp_path) and not dataset_available("imagefolder", tmp_path / "none")


def test_pixels_are_resized_rgb_in_zero_one_as_the_other_datasets(tmp_path):
    (tmp_path / "red").mkdir()
    (tmp_path / "grey").mkdir()
    for i in range(2):
        Image.new("RGB", (50, 20), (255, 0, 51)).save(tmp_path / "red" / f"{i}.png")
        Image.new("L", (7, 9), 102).save(tmp_path / "grey" / f"{i}.jpg", quality=100)
    dataset = load_dataset("imagefolder", data_dir=tmp_path, seed=0, image_size=8, test_fraction=0.5)
    images = torch.cat([dataset.train.x, dataset.test.x])
    labels = torch.cat([dataset.train.y, dataset.test.y])
    assert images.shape == (4, 3, 8, 8) and dataset.input_shape == (3, 8, 8) and len(dataset.test) == 2
    red = images[labels == dataset.classes.index("red")][0]
    torch.testing.assert_close(red[:, 0, 0], torch.tensor([1.0, 0.0, 0.2]))  # pixel / 255, as cifar10
    grey = images[labels == dataset.classes.index("grey")][0]
    assert torch.allclose(grey, torch.full_like(grey, 102 / 255), atol=2 / 255)  # three equal channels


@pytest.mark.parametrize("size", [8, 17, 64])
def test_every_image_takes_the_image_size(tmp_path, size):
    _write(tmp_path, {"a": 3, "b": 3})
    dataset = _load(tmp_path, image_size=size)
    assert dataset.input_shape == (3, size, size)
    assert dataset.train.x.shape[1:] == dataset.test.x.shape[1:] == (3, size, size)


def test_the_split_is_a_function_of_the_seed(tmp_path):
    _write(tmp_path, {"a": 20, "b": 20})
    first, again, other = _load(tmp_path, seed=1), _load(tmp_path, seed=1), _load(tmp_path, seed=2)
    assert torch.equal(first.test.x, again.test.x) and torch.equal(first.train.x, again.train.x)
    assert not torch.equal(first.test.x, other.test.x)
    assert len(first.test) == len(other.test) == 8
    torch.testing.assert_close(torch.cat([first.train.x, first.test.x]).sum(0),
                               torch.cat([other.train.x, other.test.x]).sum(0))  # the same images, split otherwise


def test_the_stratified_split_keeps_a_training_image_per_class_and_uses_no_global_rng():
    labels = np.array([0, 0, 1, 1, 1, 1, 2])
    torch.manual_seed(0)
    np.random.seed(0)
    train, test = imagefolder.stratified_split(labels, 0.6, seed=5)
    torch.manual_seed(1)
    np.random.seed(1)
    assert [t.tolist() for t in imagefolder.stratified_split(labels, 0.6, seed=5)] == [train.tolist(), test.tolist()]
    assert sorted(train.tolist() + test.tolist()) == list(range(7))
    assert set(labels[train.numpy()]) == {0, 1, 2}  # class 2's one image stays in training
    with pytest.raises(ValueError, match=r"data.test_fraction must be a number in \(0, 1\), got 1.0"):
        imagefolder.stratified_split(labels, 1.0, seed=0)


def test_train_and_test_folders_are_the_split(tmp_path):
    _write(tmp_path / "train", {"a": 4, "b": 3})
    _write(tmp_path / "test", {"a": 2, "b": 1}, seed=1)
    dataset = _load(tmp_path, image_size=12)
    assert dataset.classes == ("a", "b") and dataset.num_classes == 2
    assert dataset.train.y.tolist() == [0] * 4 + [1] * 3 and dataset.test.y.tolist() == [0, 0, 1]
    assert dataset.test.x.shape == (3, 3, 12, 12) and "train/ and test/" in dataset.source
    assert torch.equal(dataset.test.x, _load(tmp_path, seed=9, image_size=12).test.x)  # no seeded split


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_missing_or_empty_folder_is_one_line(tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("imagefolder", data_dir=None, seed=0)
    assert _one_line(err) == ("imagefolder needs data.data_dir (--data-dir): a folder with one subfolder of images "
                              "per class (root/<class>/<image files>)")
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path / "absent")
    assert _one_line(err).startswith(f"data.data_dir {str(tmp_path / 'absent')!r} is not a folder; imagefolder needs")
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err).startswith(f"data.data_dir {str(tmp_path)!r} has no class subfolders; imagefolder needs")
    with pytest.raises(ValueError, match="imagefolder needs a seed for its train/test split, got None"):
        load_dataset("imagefolder", data_dir=tmp_path)


def test_one_class_is_one_line(tmp_path):
    _write(tmp_path, {"only": 3})
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == (f"data.data_dir {str(tmp_path)!r} has one class subfolder (only); imagefolder needs "
                              "at least 2")


def test_a_class_without_images_is_one_line_naming_it(tmp_path):
    _write(tmp_path, {"a": 3, "b": 3})
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not an image")
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err).startswith(f"data.data_dir {str(tmp_path)!r}: class folder 'empty' holds no image (.jpg, ")


def test_an_unreadable_image_is_one_line_naming_the_file(tmp_path):
    _write(tmp_path, {"a": 3, "b": 3})
    broken = tmp_path / "b" / "broken.png"
    broken.write_bytes(b"not an image at all")
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == f"data.data_dir: cannot read image {str(broken)!r} (not an image format PIL knows)"
    broken.write_bytes((tmp_path / "b" / "000.png").read_bytes()[:60])  # a PNG cut short
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err).startswith(f"data.data_dir: cannot read image {str(broken)!r} (OSError: ")


def test_test_classes_must_match_the_training_classes(tmp_path):
    _write(tmp_path / "train", {"a": 2, "b": 2})
    _write(tmp_path / "test", {"a": 1, "c": 1})
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == (f"data.data_dir {str(tmp_path)!r}: test/ has the classes a, c; it must have those of "
                              "train/: a, b")


def test_a_split_without_test_images_is_one_line(tmp_path):
    _write(tmp_path, {"a": 2, "b": 2})
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path, test_fraction=0.1)
    assert _one_line(err) == (f"data.data_dir {str(tmp_path)!r}: data.test_fraction 0.1 of its 4 images leaves no test "
                              "image; raise it or add images")


def test_a_folder_too_large_for_memory_is_refused_before_decoding(tmp_path, monkeypatch):
    _write(tmp_path, {"a": 3, "b": 3})
    monkeypatch.setattr(imagefolder, "_read", lambda *a: pytest.fail("decoded a folder that was too large"))
    monkeypatch.setattr(imagefolder, "MAX_IMAGES", 5)
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == (f"data.data_dir {str(tmp_path)!r} holds 6 images, 0.0 GiB as float32 at data.image_size "
                              "32; at most 5 images and 16 GiB: lower data.image_size or use a subset")
    monkeypatch.setattr(imagefolder, "MAX_IMAGES", 10**6)
    monkeypatch.setattr(imagefolder, "MAX_GIB", 1e-3)  # 6 x 3 x 256 x 256 x 4 bytes: 0.0044 GiB
    with pytest.raises(DataNotFoundError, match=r"holds 6 images, 0.0 GiB .* at data.image_size 256"):
        _load(tmp_path, image_size=256)


# ------------------------------------------------------------------ true bit depth (issue 54)


def _train_and_test(tmp_path: Path, write) -> None:
    """train/ and test/ with class folders a and b, one image each, written by ``write(folder, index)``: index 0, 1
    (a, b) in train/, 2, 3 in test/, so the dataset's images are in index order."""
    for split, first in (("train", 0), ("test", 2)):
        for offset, name in enumerate("ab"):
            (tmp_path / split / name).mkdir(parents=True)
            write(tmp_path / split / name, first + offset)


def _all_images(dataset) -> torch.Tensor:
    return torch.cat([dataset.train.x, dataset.test.x])


def test_16_bit_greyscale_pngs_decode_as_sample_over_65535(tmp_path):
    """They came out 93.9 % white: Pillow's RGB conversion clips 16-bit samples at 255."""
    rng = np.random.default_rng(3)
    samples = {}

    def write(folder, i):
        samples[i] = rng.integers(0, 4096, (8, 8), dtype=np.uint16) * 16  # 12-bit data, scaled up as PNG stores it
        samples[i][0, 0], samples[i][0, 1] = 65535, 1
        Image.fromarray(samples[i]).save(folder / f"{i}.png")
        assert Image.open(folder / f"{i}.png").mode == "I;16"

    _train_and_test(tmp_path, write)
    decoded = _all_images(_load(tmp_path, image_size=8))  # the images' own size: no resampling
    assert decoded.shape == (4, 3, 8, 8) and decoded.dtype == torch.float32
    for i in range(4):
        expected = torch.from_numpy(samples[i].astype(np.float64) / 65535)
        for channel in range(3):
            assert (decoded[i, channel].double() - expected).abs().max() <= 1 / 65535 / 100
    assert decoded[0, 0, 0, 0] == 1.0 and decoded[0, 0, 0, 1] == pytest.approx(1 / 65535, rel=1e-6)
    assert (decoded < 0.99).float().mean() > 0.9  # not white


def test_16_bit_pngs_are_resized_as_8_bit_ones_are(tmp_path):
    """A 16-bit image whose samples are 257 x an 8-bit one's (the same picture at full scale) resizes to the 8-bit
    one's values within one 8-bit level (the 8-bit resize rounds to uint8 in fixed point)."""
    rng = np.random.default_rng(4)
    pixels = rng.integers(0, 256, (20, 30), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "eight.png")
    Image.fromarray(pixels.astype(np.uint16) * 257).save(tmp_path / "sixteen.png")
    eight = imagefolder.decode_image(tmp_path / "eight.png", 12)
    sixteen = imagefolder.decode_image(tmp_path / "sixteen.png", 12)
    assert sixteen.shape == eight.shape == (3, 12, 12)
    assert (sixteen - eight).abs().max() <= 1 / 255


def test_float_tiffs_in_zero_one_decode_exactly(tmp_path):
    """They came out all black: Pillow's RGB conversion truncates floats in [0, 1] to 0 or 1 of 255."""
    rng = np.random.default_rng(5)
    values = {}

    def write(folder, i):
        values[i] = rng.random((6, 6), dtype=np.float32)
        values[i][0, 0], values[i][0, 1] = 0.0, 1.0
        Image.fromarray(values[i]).save(folder / f"{i}.tif")
        assert Image.open(folder / f"{i}.tif").mode == "F"

    _train_and_test(tmp_path, write)
    decoded = _all_images(_load(tmp_path, image_size=6))  # the images' own size: not resampled
    for i in range(4):
        assert torch.equal(decoded[i], torch.from_numpy(values[i]).expand(3, -1, -1))  # every value as written
    resized = _all_images(_load(tmp_path, image_size=4))
    assert resized.shape == (4, 3, 4, 4) and 0 <= resized.min() and resized.max() <= 1
    assert resized.mean() == pytest.approx(decoded.mean().item(), abs=0.03)  # the bilinear filter keeps the level


@pytest.mark.parametrize("values, said", [
    (np.array([[0.0, 1.5], [0.2, 0.3]], dtype=np.float32), "is 32-bit float with values in [0, 1.5]"),
    (np.array([[-0.25, 0.5], [0.2, 0.3]], dtype=np.float32), "is 32-bit float with values in [-0.25, 0.5]"),
    (np.array([[0.0, np.nan], [0.2, 0.3]], dtype=np.float32), "is 32-bit float and holds NaN or infinite values"),
])
def test_a_float_tiff_outside_zero_one_is_one_line_naming_the_file(tmp_path, values, said):
    _write(tmp_path, {"a": 2, "b": 2})
    bad = tmp_path / "b" / "bad.tif"
    Image.fromarray(values).save(bad)
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == f"data.data_dir: image {str(bad)!r} {said}; float images must hold values in [0, 1]"


def _png16(array: np.ndarray) -> bytes:
    """A 16-bit PNG of ``array`` (H x W x C, uint16; C = 2: grey + alpha, 3: RGB), written by hand: Pillow cannot
    write 16-bit colour."""
    import struct
    import zlib

    height, width, channels = array.shape
    rows = b"".join(b"\x00" + array[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 16, {2: 4, 3: 2}[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("channels, raw", [(3, "RGB;16B"), (2, "LA;16B")])
def test_16_bit_colour_which_pillow_would_cut_to_8_bits_is_one_line(tmp_path, channels, raw):
    _write(tmp_path, {"a": 2, "b": 2})
    bad = tmp_path / "a" / "colour16.png"
    bad.write_bytes(_png16(np.random.default_rng(6).integers(0, 65536, (4, 5, channels), dtype=np.uint16)))
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == (f"data.data_dir: image {str(bad)!r} has 16-bit RGBA samples ({raw}), which Pillow "
                              "decodes to their high 8 bits only; save it as 8-bit colour or 16-bit greyscale"
                              ).replace("RGBA", "RGB" if channels == 3 else "RGBA")


def test_32_bit_integer_images_are_one_line(tmp_path):
    _write(tmp_path, {"a": 2, "b": 2})
    bad = tmp_path / "a" / "int32.tif"
    Image.fromarray(np.arange(20, dtype=np.int32).reshape(4, 5) * 100_000).save(bad)
    with pytest.raises(DataNotFoundError) as err:
        _load(tmp_path)
    assert _one_line(err) == (f"data.data_dir: image {str(bad)!r} holds I;32S integer samples, whose range the file "
                              "does not declare; save it as 8- or 16-bit unsigned, or as float in [0, 1]")


def test_8_bit_images_decode_as_before(tmp_path):
    """The 8-bit path is torchvision's loader and resize, pixel / 255: palette, 1-bit, grey + alpha and RGBA too."""
    rng = np.random.default_rng(7)
    rgb = Image.fromarray(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8))
    for name, image in {"rgb.png": rgb, "p.png": rgb.convert("P"), "bw.png": rgb.convert("1"),
                        "la.png": rgb.convert("LA"), "rgba.png": rgb.convert("RGBA"), "jpeg.jpg": rgb}.items():
        image.save(tmp_path / name)
        expected = transforms.Compose([transforms.Resize((7, 7)), transforms.PILToTensor()])(
            Image.open(tmp_path / name).convert("RGB")).float() / 255
        assert torch.equal(imagefolder.decode_image(tmp_path / name, 7), expected), name
