"""What an adversary does with what it observes: gradient inversion, empirical DP tests.

Attacks treat a mechanism as a black box and a model as a ``torch.nn.Module``. The attacks
themselves arrive with their issues; the threat-model views they consume are recorded by
``auditkit.fl.simulation.Observation``.
"""
