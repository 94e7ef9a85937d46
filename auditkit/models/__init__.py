"""auditkit's models: the seed papers' architectures (``auditkit.models.seed``, with their exact parameter counts),
torchvision's classification models (``auditkit.models.torchvision_models``) and a user's own factory, all built by
:func:`create_model` (``auditkit.models.create``); :func:`build_model` builds the one a config's ``[training]`` table
names, with its options. The seed builders (``cnn``, ``lenet``, ...) stay importable from here."""
from auditkit.models.create import (
    MODEL_FORMS, NORMS, ModelName, build_model, check_dp_sgd, count_parameters, create_model, model_kind)
from auditkit.models.seed import MODEL_NAMES, cifar_cnn, cnn, lenet, linear, mlp, mlp200

__all__ = ["MODEL_FORMS", "MODEL_NAMES", "NORMS", "ModelName", "build_model", "check_dp_sgd", "count_parameters",
           "create_model", "model_kind", "cifar_cnn", "cnn", "lenet", "linear", "mlp", "mlp200"]
