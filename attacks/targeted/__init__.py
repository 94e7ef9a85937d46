"""Attacks that target specific mechanisms, one module per mechanism family, each registering its adaptive tests
for the mechanisms it targets (``auditkit.attacks.adaptive_tests.adaptive_test``), the way a plugin registers its own:

* ``jopeq``: JoPEQ's scale zeta sent in clear, and quantizer overload (paper 002);
* ``cepam``: CEPAM 000's normalisation, which reveals ||x|| (paper 000);
* ``dpsq``: DP-SQ's claim, which holds only inside one quantizer cell (paper 001);
* ``msp_reconstruction``: the adaptive server's least-squares reconstruction of MSP-FL's models from the
  consensus transcript, and its estimates of the updates for gradient inversion (paper 004);
* ``msp_transcript``: MSP-FL's transcript as an adaptive test (paper 004).

Every module of this package is imported here, so adding one registers its tests.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
