"""auditkit's data layer: datasets, natural-image patches and client partitions.

* :func:`load_dataset` returns a :class:`Dataset` (``train``/``test`` :class:`Split` of float32 N x C x H x W
  images in [0, 1] and int64 labels) for one of :data:`DATASETS`: the embedded ``digits`` (scikit-learn's
  bundled handwritten digits at 1x28x28, no download) or ``mnist`` / ``fashion-mnist`` / ``svhn`` / ``cifar10`` /
  ``cifar100`` read in torchvision's layout from a local folder (CIFAR's pickled batches through
  ``auditkit.data.safe_pickle``) (downloaded only when asked; missing files raise :class:`DataNotFoundError`), or
  ``imagefolder``: a user's images in torchvision's ImageFolder layout, resized to RGB squares.
* :func:`load_image_patches` cuts CIFAR-shaped RGB patches from scikit-image's bundled photographs, the
  default targets for inversion attacks; :func:`image_patch_sources` says where each patch came from.
* :func:`partition` splits sample indices among FL clients (:data:`PARTITION_SCHEMES`: iid, Dirichlet label
  skew, McMahan shards); :func:`train_validation_split` carves off a validation set.
"""
from auditkit.data.catalog import DATASETS, dataset_available, load_dataset
from auditkit.data.dataset import DataNotFoundError, Dataset, Split
from auditkit.data.embedded import PatchSource, image_patch_sources, load_image_patches
from auditkit.data.partition import PARTITION_SCHEMES, partition, train_validation_split

__all__ = [
    "DATASETS",
    "PARTITION_SCHEMES",
    "DataNotFoundError",
    "Dataset",
    "PatchSource",
    "Split",
    "dataset_available",
    "image_patch_sources",
    "load_dataset",
    "load_image_patches",
    "partition",
    "train_validation_split",
]
